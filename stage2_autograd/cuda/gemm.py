"""The CUDA GEMM ladder: finds the variants in gemm/, compiles them through CuPy (NVRTC), launches them.

Each rung is one file ``gemm/gemm_NN_idea.cu`` with one entry point named like the file, and
every entry point has the same signature (llm.c order: output, inputs, sizes, scalars)::

    extern "C" __global__ void gemm_NN_idea(float *C, const T *A, const T *B,
                                            int M, int N, int K, float alpha, float beta)

computing ``C = alpha * A @ B + beta * C`` for row-major A (M, K), B (K, N) and float32 C (M, N);
C is not read when beta == 0. A grid of depth ``batch`` (``gridDim.z``) multiplies that many matrices
lying one after another in each array: a block first moves its pointers to matrix ``blockIdx.z``.
``T`` is ``float`` for ``precision=fp32`` rungs and a bfloat16 bit
pattern (``unsigned short``, a uint16 array here) for ``precision=bf16`` ones. The file's header
comment is the registry: its ``launch:`` line gives the block size, the tile of C per block
(which fixes the grid), dynamic shared memory, the PTX arch and the precision, so adding a rung
means adding one file. CuPy is imported inside functions: this module imports without it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

GEMM_DIR = Path(__file__).with_name("gemm")
HEADER_FIELDS = ("idea", "fixes", "launch", "measured")
LAUNCH_KEYS = ("threads", "bm", "bn", "smem", "arch", "precision")
PRECISIONS = {"fp32": "float32", "bf16": "uint16"}  # precision -> dtype of A and B on the host
INT_LIMIT = 2**31  # the kernels index with int (within one matrix)
MAX_BATCH = 65535  # gridDim.z's limit: a larger batch takes several launches
_ENTRY = re.compile(r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(')


@dataclass(frozen=True)
class Variant:
    name: str  # also the kernel's entry point
    path: Path
    title: str  # the header's first line: what the rung adds
    fields: dict  # idea, fixes, launch, measured, as written
    threads: int
    bm: int  # rows of C per block
    bn: int  # columns of C per block
    smem: int  # dynamic shared memory in bytes (0: static only)
    arch: str  # the oldest arch the PTX is checked for: sm_80 or sm_90a
    precision: str  # fp32 or bf16

    @property
    def input_dtype(self) -> str:
        return PRECISIONS[self.precision]

    def grid(self, M: int, N: int, batch: int = 1) -> tuple[int, int, int]:
        return (-(-N // self.bn), -(-M // self.bm), batch)


def parse_header(text: str, name: str) -> dict:
    """The header comment's ``field: value`` entries (a value runs until the next field or blank line)."""
    match = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    if match is None:
        raise ValueError(f"gemm variant {name}: the file must open with a /* header comment */")
    body = match.group(1)
    first = body.strip().splitlines()[0]
    fields: dict = {"title": first.removeprefix(f"{name}:").strip()}
    for key in HEADER_FIELDS:
        found = re.search(rf"^\s*{key}:\s*(.*?)(?=^\s*\w+:|\n\s*\n|\Z)", body, re.S | re.M)
        if found is None:
            raise ValueError(f"gemm variant {name}: the header has no '{key}:' line")
        fields[key] = " ".join(found.group(1).split())
    return fields


def parse_launch(line: str, name: str) -> dict:
    pairs = dict(item.split("=", 1) for item in line.split() if "=" in item)
    missing = [k for k in LAUNCH_KEYS if k not in pairs]
    if missing:
        raise ValueError(f"gemm variant {name}: launch line '{line}' lacks {missing}")
    if pairs["precision"] not in PRECISIONS:
        raise ValueError(f"gemm variant {name}: precision {pairs['precision']!r} is not one of {list(PRECISIONS)}")
    return {k: (pairs[k] if k in ("arch", "precision") else int(pairs[k])) for k in LAUNCH_KEYS}


def load_variant(path: Path) -> Variant:
    text = path.read_text()
    name = path.stem
    entries = _ENTRY.findall(text)
    if entries != [name]:
        raise ValueError(f"gemm variant {name}: expected one extern \"C\" __global__ entry named {name}, "
                         f"found {entries}")
    fields = parse_header(text, name)
    return Variant(name=name, path=path, title=fields.pop("title"), fields=fields,
                   **parse_launch(fields["launch"], name))


@functools.cache
def variants() -> dict[str, Variant]:
    """Every rung in gemm/, in ladder order."""
    return {p.stem: load_variant(p) for p in sorted(GEMM_DIR.glob("gemm_*.cu"))}


def get_variant(name: str) -> Variant:
    table = variants()
    if name not in table:
        raise ValueError(f"gemm: unknown variant {name!r}; expected one of {list(table)}")
    return table[name]


def check_operands(variant: Variant, A, B, C=None, beta: float = 0.0) -> tuple[int, int, int]:
    """Shapes, dtypes and layouts, checked before any launch; works on any array with
    .shape/.dtype/.flags (numpy too), so it is testable without a GPU. Returns (M, N, K)."""
    op = f"gemm {variant.name}"
    for label, x in (("A", A), ("B", B)):
        if len(x.shape) != 2:
            raise ValueError(f"{op}: {label} must be 2-D, got shape {tuple(x.shape)}")
        if str(x.dtype) != variant.input_dtype:
            raise TypeError(f"{op}: {label} must be {variant.input_dtype} for precision {variant.precision}, "
                            f"got {x.dtype}")
        if not x.flags.c_contiguous:
            raise ValueError(f"{op}: {label} (shape {tuple(x.shape)}) must be C-contiguous")
    (M, K), (K2, N) = A.shape, B.shape
    if K != K2:
        raise ValueError(f"{op}: A {tuple(A.shape)} @ B {tuple(B.shape)}: inner dims differ ({K} vs {K2})")
    if min(M, N, K) < 1:
        raise ValueError(f"{op}: A {tuple(A.shape)} @ B {tuple(B.shape)}: every dim must be >= 1")
    if max(M * K, K * N, M * N) >= INT_LIMIT:
        raise ValueError(f"{op}: A {tuple(A.shape)} @ B {tuple(B.shape)}: each matrix must have < 2^31 elements")
    if C is None:
        if beta != 0.0:
            raise ValueError(f"{op}: beta = {beta} needs an input C of shape ({M}, {N})")
        return M, N, K
    if str(C.dtype) != "float32":
        raise TypeError(f"{op}: C must be float32, got {C.dtype}")
    if tuple(C.shape) != (M, N) or not C.flags.c_contiguous:
        raise ValueError(f"{op}: C must be a C-contiguous array of shape ({M}, {N}), got {tuple(C.shape)}")
    return M, N, K


def runs_on(variant: Variant, capability: int) -> bool:
    """Whether a device of compute capability ``capability`` (90 for sm_90) can run the rung:
    sm_80 code runs on anything newer; arch-specific code (sm_90a) only on that arch."""
    needed = int(re.sub(r"\D", "", variant.arch))
    return capability == needed if variant.arch.endswith("a") else capability >= needed


def _require_cupy():
    try:
        import cupy
    except ImportError as e:
        raise RuntimeError("the cuda device needs CuPy: pip install -e '.[cuda]' (cupy-cuda13x)") from e
    return cupy


@functools.cache
def _kernel(name: str, device_id: int):
    """Compile one rung for device ``device_id`` (NVRTC), cached for the process."""
    cupy = _require_cupy()
    variant = get_variant(name)
    capability = int(cupy.cuda.Device(device_id).compute_capability)  # "90" on an H100
    if not runs_on(variant, capability):
        raise RuntimeError(f"gemm {name}: needs {variant.arch}, device {device_id} is sm_{capability}")
    if variant.arch.endswith("a"):
        kernel = _compile_arch_specific(cupy, variant)
    else:  # CuPy picks the device's arch and caches the binary on disk
        kernel = cupy.RawModule(code=variant.path.read_text(), options=("--std=c++17",)).get_function(name)
    if variant.smem > 48 * 1024:  # above the static limit a kernel must opt in
        if hasattr(kernel, "max_dynamic_shared_size_bytes"):
            kernel.max_dynamic_shared_size_bytes = variant.smem
        else:
            cupy.cuda.driver.funcSetAttribute(
                kernel.ptr, cupy.cuda.driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, variant.smem)
    return kernel


def _compile_arch_specific(cupy, variant: Variant):
    """sm_90a code (wgmma) runs only on that exact arch, which CuPy's own -arch choice never names,
    and RawModule refuses a second -arch option: compile with NVRTC directly and load the cubin."""
    from cupy_backends.cuda.libs import nvrtc

    program = nvrtc.createProgram(variant.path.read_text(), f"{variant.name}.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(program, ("--std=c++17", f"--gpu-architecture={variant.arch}"))
        except nvrtc.NVRTCError as e:
            raise RuntimeError(f"gemm {variant.name}: NVRTC failed\n{nvrtc.getProgramLog(program)}") from e
        cubin = nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)
    module = cupy.cuda.function.Module()
    module.load(cubin)
    return module.get_function(variant.name)  # the Function keeps its Module alive


def launcher(name: str, A, B, C, alpha: float = 1.0, beta: float = 0.0):
    """Check the operands once and return a no-argument function that launches the rung on them:
    what a timing loop calls, so that the loop measures the kernel and not the checks."""
    import numpy as np

    cupy = _require_cupy()
    variant = get_variant(name)
    M, N, K = check_operands(variant, A, B, C, beta)
    devices = {x.device.id for x in (A, B, C)}
    if len(devices) != 1:
        raise RuntimeError(f"gemm {name}: operands live on different devices {sorted(devices)}")
    device = cupy.cuda.Device(devices.pop())
    with device:
        kernel = _kernel(name, device.id)
    grid, block = variant.grid(M, N), (variant.threads, 1, 1)
    args = (C, A, B, np.int32(M), np.int32(N), np.int32(K), np.float32(alpha), np.float32(beta))

    def launch() -> None:
        with device:
            kernel(grid, block, args, shared_mem=variant.smem)
    return launch


def gemm(name: str, A, B, C=None, alpha: float = 1.0, beta: float = 0.0):
    """C = alpha * A @ B + beta * C with rung ``name`` on CuPy arrays; returns C (allocated when None)."""
    cupy = _require_cupy()
    if C is None:
        M, N, _ = check_operands(get_variant(name), A, B, None, beta)
        with cupy.cuda.Device(A.device.id):
            C = cupy.empty((M, N), dtype=cupy.float32)
    launcher(name, A, B, C, alpha, beta)()
    return C
