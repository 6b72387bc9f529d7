"""The real cuda backend: CuPy hosts memory (its pool), compilation (NVRTC) and launches.

Only CuPy's plumbing is used here, never its array math: every kernel is one the renderer wrote
(or runtime.py's fixed ones). CuPy is imported when the first cuda tensor is made, so a machine
without CuPy or a GPU runs the CPU device untouched and gets a RuntimeError naming what is missing
only if it asks for "cuda".
"""

from __future__ import annotations

import numpy as np

INSTALL = "pip install -e '.[cuda]'"
# --fmad=false: no fused multiply-add, so a*b+c rounds twice as on the CPU (cc -ffp-contract=off); a
# reduction's own acc + a*b is an explicit fmaf (cuda/renderer.py, as the CPU fuses it there).
NVRTC_OPTIONS = ("--std=c++17", "--fmad=false")


class CupyBackend:
    name = "cupy"

    def __init__(self, op: str = "cuda"):
        try:
            import cupy
        except ImportError as e:
            raise RuntimeError(f"{op}: the cuda device needs CuPy, which is not installed; {INSTALL} "
                               "(and an NVIDIA GPU with its driver)") from e
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # CuPy raises its own error types when the driver or libcudart is missing
            raise RuntimeError(f"{op}: the cuda device needs an NVIDIA GPU and its driver; CuPy found none "
                               f"({type(e).__name__}: {e})") from e
        if count == 0:
            raise RuntimeError(f"{op}: the cuda device needs an NVIDIA GPU; CuPy found none")
        self.cupy = cupy

    # ---- memory: CuPy's pool, copies through the CUDA runtime ----

    def alloc(self, nbytes: int):
        return self.cupy.cuda.alloc(max(nbytes, 1))  # a MemoryPointer: .ptr, freed to the pool with it

    def upload(self, ptr: int, host: np.ndarray) -> None:
        rt = self.cupy.cuda.runtime
        if host.nbytes:
            rt.memcpy(ptr, host.ctypes.data, host.nbytes, rt.memcpyHostToDevice)

    def download(self, ptr: int, nbytes: int) -> np.ndarray:
        """nbytes from device address ptr into fresh host memory (a synchronous copy: waits for the kernels)."""
        rt = self.cupy.cuda.runtime
        out = np.empty(nbytes, np.uint8)
        if nbytes:
            rt.memcpy(out.ctypes.data, ptr, nbytes, rt.memcpyDeviceToHost)
        return out

    def synchronize(self) -> None:
        self.cupy.cuda.runtime.deviceSynchronize()

    # ---- kernels ----

    def function(self, name: str, source: str):
        """One kernel, compiled by NVRTC for this device's arch (CuPy caches the binary on disk)."""
        return self.cupy.RawModule(code=source, options=NVRTC_OPTIONS).get_function(name)
