"""The cuda device's kernels: the GEMM ladder (gemm.py, gemm/*.cu) and the runtime kernels' CUDA C
source (elementwise_src.py). Importing this package imports neither CuPy nor a GPU driver."""
