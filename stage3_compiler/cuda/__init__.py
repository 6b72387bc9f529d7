"""The cuda device: kernels rendered to CUDA C (renderer.py), compiled by NVRTC and launched through
CuPy (backend.py, runtime.py), on device memory (buffer.py). Importing this package imports neither
CuPy nor a GPU driver."""
