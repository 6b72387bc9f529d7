"""Sessions: `nox` runs the default test sessions (what CI runs); `nox -l` lists them all."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"


def install(session: nox.Session, *extras: str) -> None:
    # --no-compile: no bytecode for every module of every package (torch's thousands) up front; Python
    # writes it for the modules the tests import, as they import them
    session.install("--no-compile", "-e", f".[{','.join(extras)}]" if extras else ".")


def lower_isas() -> list[str]:
    """The instruction sets below this CPU's own that it runs (stage1_ndarray/isa.py, loaded as a file:
    nox's own environment holds nothing of the project). The sessions run their instruction-set-bound
    tests once more under each (SITP_ISA), so every machine tests the AVX2 and plain paths too."""
    spec = importlib.util.spec_from_file_location("sitp_isa", Path(__file__).parent / "stage1_ndarray" / "isa.py")
    isa = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(isa)
    return [choice.value for choice in isa.lower_than_native()]


# The long pytest runs use every core (pytest-xdist, at most 4 workers): most tests are small and bound by
# Python, and a stage3 test waits on its C compiler half the time (benchmarks/results/nox_time.md).
# Several processes also keep each one's memory maps bounded: every distinct stage3 kernel is a
# shared library loaded into the process (5 maps each), and one process running stage3's whole suite
# loaded ~14000, past Linux's 65530 maps a process (vm.max_map_count): mmap failed, and a test then
# hung starting a compile thread.
# "worksteal": a worker that runs out of tests takes some of the other's queue, so a run does not end on
# one worker's tail of slow tests (a training trajectory, a big gradient).
WORKERS = ["-n", str(min(os.cpu_count() or 1, 4)), "--dist", "worksteal"]

# Under python -O asserts vanish: a stage that did work inside one gives wrong answers or lets bad input
# through. Every op's forward in one dtype and the error contract catch that in seconds; the whole suite
# again under -O doubled a stage session's test time for no more coverage of the stage's lines.
OPTIMIZED_SLICE = ["conformance/test_forward.py", "conformance/test_errors.py", "-k", "float32 or test_errors"]


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over the whole tree."""
    session.install("ruff")
    session.run("ruff", "check", ".")


@nox.session
def stage1(session: nox.Session) -> None:
    """Install stage1, run its own tests and the conformance suite against it."""
    install(session, "test")
    session.run("pytest", "-q", *WORKERS, "stage1_ndarray/tests", "conformance", "--stage", "stage1_ndarray",
                "-k", "not dtype_extra", *session.posargs)  # (the new dtypes' sample: conformance/cases.py)
    optimized(session, "stage1_ndarray")
    for isa in lower_isas():  # the GEMM ladder's AVX2 and plain-C paths, and the gcc-vectorized kernels
        session.run("pytest", "-q", "stage1_ndarray/tests/test_gemm_variants.py", "conformance/test_forward.py",
                    "--stage", "stage1_ndarray", "-k", "float32 or test_gemm", *session.posargs, env={"SITP_ISA": isa})


@nox.session
def stage2(session: nox.Session) -> None:
    """Install stage2, run its own tests and the conformance suite (gradients against torch) against it,
    on the CPU and on the cuda device, whose generated kernels run here on the CPU emulator
    (common/cuda_emulation.py); `nox -s cuda` runs the cuda half on a real GPU."""
    install(session, "test", "torch")
    session.run("pytest", "-q", *WORKERS, "stage2_autograd/tests", "conformance", "--stage", "stage2_autograd",
                "-k", "not dtype_extra", *session.posargs, env={"SITP_CUDA_BACKEND": "emulate"})
    optimized(session, "stage2_autograd")


# The part of the conformance suite the default stage3 session runs on the emulated cuda device: every
# op's forward in the default float dtype, type promotion, the error contract, the extremes and the view
# properties, and the gradients whose backward is more than an elementwise formula (reductions, products,
# gathers, windows, normalizations: the kernels the CUDA renderer's GROUP and LOCAL rewrite). An
# elementwise op's gradient is one more elementwise kernel, the kind its forward already runs there; its
# forward on a view (layout_case) reads through the index expressions the CPU's C renderer writes too
# (the CUDA renderer is that renderer with CUDA's spellings), so only the reducing ops' views run here. The
# whole suite there would add about as much as the CPU half again (most of it g++ building each new
# kernel), which the default `nox` cannot afford on two cores; `nox -s stage3_cuda` runs all of it.
REDUCING_GRADS = ("sum or prod or min or max or mean or var or std or logsumexp or softmax or matmul or einsum or "
                  "getitem or pad or conv or pool or cumsum or cross or norm or attention or gather or scatter or "
                  "cat or stack or split")
STAGE3_CUDA_SUBSET = (f"(float32 and not test_grad.py and (not layout_case or {REDUCING_GRADS})) or "
                      f"test_promotion or test_error or test_bad_inputs or hypothesis or "
                      f"(test_grad.py and float32 and ({REDUCING_GRADS}))")
# Without FlashAttention (PASSES=-online; the online pass is on by default): attention's gradients and the
# zoo's training trajectories against torch with the softmax unfused, on the emulated cuda device (the only
# default run of the zoo on that device). On the CPU, unfused attention runs wherever a mask is given (the
# CPU parts above) and in the core alone (PASSES=none, below: attention's gradients and nanoGPT's trajectory).
STAGE3_ONLINE_SUBSET = "attention or sdpa or trajectory"
# The core alone (PASSES=none, stage3_compiler/passes.py): every op's forward and the reducing ops' gradients
# in float32, and the zoo's training trajectories against torch; `nox -s stage3_core` runs the whole suite so.
STAGE3_CORE_PARTS = ["conformance/test_forward.py", "conformance/test_grad.py", "conformance/test_models.py"]
STAGE3_CORE_SUBSET = (f"(test_forward.py and float32) or (test_grad.py and float32 and ({REDUCING_GRADS})) or "
                      "trajectory")
# What the instruction set changes (the vector width, the matmul tile, gcc's code for them), run again under
# each lower one the machine runs: kernel options, tiles (those that overlap too), vectorizing and the
# kernels gcc's vectorizer once miscompiled (test_primitives: flips, pads); and every op's forward in float32
# on contiguous inputs under the highest of them (AVX2 on an AVX-512 machine: the CPUs one class below; a
# view is index arithmetic, the same at every width; the baseline's 4-float vectors take the same code
# paths at another width, which the unit tests check)
STAGE3_ISA_TESTS = ["stage3_compiler/tests/test_opts.py", "stage3_compiler/tests/test_vectorize.py",
                    "stage3_compiler/tests/test_upcast.py", "stage3_compiler/tests/test_fused_multiply_add.py",
                    "stage3_compiler/tests/test_overlap.py", "stage3_compiler/tests/test_primitives.py"]


@nox.session
def stage3(session: nox.Session) -> None:
    """Install stage3, run its own tests and the conformance suite (forward, gradients, models) against it
    on the CPU, and a named part of the suite (STAGE3_CUDA_SUBSET) on the cuda device, whose generated
    CUDA C runs here on the CPU emulator (common/cuda_emulation.py), and attention's part without FlashAttention
    (STAGE3_ONLINE_SUBSET, PASSES=-online) there, and a slice of it with every speed pass off (STAGE3_CORE_SUBSET,
    PASSES=none: the core alone). Kernels compile on first use and are
    cached under $SITP_CACHE: a first run compiles thousands of small kernels, a second finds them on disk."""
    install(session, "test", "torch")
    emulate = {"SITP_CUDA_BACKEND": "emulate"}
    session.run("pytest", "-q", *WORKERS, "stage3_compiler/tests", "conformance/test_errors.py",
                "conformance/test_extremes.py", "--stage", "stage3_compiler", "--device", "CPU", *session.posargs,
                env=emulate)
    for part in (["conformance/test_forward.py", "conformance/test_half.py", "conformance/test_small_ints.py"],
                 ["conformance/test_grad.py", "conformance/test_models.py", "conformance/test_views_hypothesis.py",
                  "conformance/test_layers.py", "conformance/test_optimizers.py", "conformance/test_programs.py"]):
        session.run("pytest", "-q", *WORKERS, *part, "--stage", "stage3_compiler", "--device", "CPU",
                    "-k", "not dtype_extra", *session.posargs, env=emulate)
    session.run("pytest", "-q", *WORKERS, "conformance", "--stage", "stage3_compiler", "--device", "CUDA",
                "-k", STAGE3_CUDA_SUBSET, *session.posargs, env=emulate)
    session.run("pytest", "-q", *WORKERS, "conformance/test_models.py", "conformance/test_grad.py", "--stage",
                "stage3_compiler", "--device", "CUDA", "-k", STAGE3_ONLINE_SUBSET, *session.posargs,
                env={**emulate, "PASSES": "-online"})
    session.run("pytest", "-q", *WORKERS, *STAGE3_CORE_PARTS, "--stage", "stage3_compiler", "--device", "CPU",
                "-k", STAGE3_CORE_SUBSET, *session.posargs, env={"PASSES": "none"})
    for i, isa in enumerate(lower_isas()):  # the generated C for AVX2's and SSE2's registers (cpu/compiler.py)
        forward = ["conformance/test_forward.py", "--stage", "stage3_compiler", "--device", "CPU", "-k",
                   "not test_forward.py or (float32 and not layout_case)"] if i == 0 else []
        session.run("pytest", "-q", *WORKERS, *STAGE3_ISA_TESTS, *forward, *session.posargs, env={"SITP_ISA": isa})


@nox.session(default=False)
def stage3_cuda(session: nox.Session) -> None:
    """stage3's whole conformance suite on its cuda device, run by the CPU emulator (`nox -s cuda`: on a GPU)."""
    install(session, "test", "torch")
    session.run("pytest", "-q", *WORKERS, "stage3_compiler/tests/test_cuda.py", "conformance", "--stage",
                "stage3_compiler", "--device", "CUDA", "--every-dtype-view", *session.posargs,
                env={"SITP_CUDA_BACKEND": "emulate"})


def optimized(session: nox.Session, stage: str) -> None:
    """A slice of the conformance suite once more under `python -O`, which drops asserts (OPTIMIZED_SLICE;
    the suite's own checks raise without assert). The CPU only: the emulated cuda half ran above and
    shares every Python line with it."""
    session.run("pytest", "-q", "-p", "no:cacheprovider", *OPTIMIZED_SLICE, "--stage", stage, "--device", "CPU",
                *session.posargs, env={"PYTHONOPTIMIZE": "1"})


@nox.session(default=False)
def stage3_core(session: nox.Session) -> None:
    """stage3's whole conformance suite on the CPU with every speed pass off (PASSES=none): the core alone."""
    install(session, "test", "torch")
    session.run("pytest", "-q", *WORKERS, "conformance", "--stage", "stage3_compiler", "--device", "CPU",
                "--every-dtype-view", *session.posargs, env={"PASSES": "none"})


@nox.session(default=False)
def conformance(session: nox.Session) -> None:
    """The whole conformance suite against every stage present, each view case in every dtype (the stage
sessions run the views in float32: conformance/cases.py says why)."""
    install(session, "test")
    session.run("pytest", "-q", "conformance", "--every-dtype-view", *session.posargs)


@nox.session
def models(session: nox.Session) -> None:
    """Data loaders, tokenizers, the model zoo, nanochat, the training loop on real data (fetches the data
    once), data-parallel training on two MPI ranks (mpich's wheel), and the chat and viz pages in a browser."""
    install(session, "test", "data", "torch", "dist", "serve")
    session.run("python", "-m", "common.data.fetch")
    install_chromium(session)
    session.run("pytest", "-q", *WORKERS, "common/tests", *session.posargs)


BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def install_chromium(session: nox.Session) -> None:
    """The chat and viz pages are tested in a real headless browser: Debian's chromium, installed here when it is
    missing and apt can install it (root on Debian: ~12 s, ~110 MB download); otherwise those tests skip, saying so."""
    if os.environ.get("SITP_CHROMIUM") or any(shutil.which(name) for name in BROWSERS):
        return
    if not shutil.which("apt-get") or os.geteuid() != 0:
        session.log("no chromium and no root apt-get: the web UI's browser test will skip")
        return
    session.run("apt-get", "update", "-qq", external=True, success_codes=[0, 100])
    session.run("apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium", external=True,
                success_codes=[0, 100])


@nox.session(default=False)
def nanogpt(session: nox.Session) -> None:
    """The main job: train the nanoGPT CPU config on character-level Shakespeare (stage2), print samples."""
    install(session, "data")
    session.run("python", "-m", "common.data.fetch")
    session.run("sitp", "train", "nanogpt", "--stage", "2", *session.posargs)


@nox.session(default=False)
def nanochat(session: nox.Session) -> None:
    """The small nanochat pipeline (stage2): BPE tokenizer, base pretraining, mid-training, SFT, report card."""
    install(session, "data")
    session.run("python", "-m", "common.data.fetch")
    session.run("sitp", "nanochat", *session.posargs)


@nox.session(default=False)
def bench_train(session: nox.Session) -> None:
    """nanoGPT CPU-config step time on stage2 and jitted stage3 vs PyTorch eager, and peak memory; JSON under
    benchmarks/results/."""
    install(session, "test", "torch")
    session.run("pytest", "-s", "benchmarks/test_train.py", "--benchmark-json", "benchmarks/results/train.json",
                *session.posargs)


def asan_env(session: nox.Session) -> dict[str, str]:
    """The environment that runs Python over kernels built with AddressSanitizer (skips without libasan)."""
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libasan):
        session.skip("gcc has no libasan here")
    # libstdc++ is preloaded too: ASan must find __cxa_throw at start-up, or the first C++ exception
    # of an extension (matplotlib's ft2font, imported by the model tests) aborts the process.
    libstdcxx = subprocess.run(["gcc", "-print-file-name=libstdc++.so"], capture_output=True, text=True).stdout.strip()
    return {"SITP_SANITIZE": "address", "LD_PRELOAD": f"{libasan} {libstdcxx}",
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1"}  # CPython itself is not leak-clean


# nvcc is a child of the tests and inherits the preloaded libasan, under which it crashes; `nox -s ptx` runs it
NO_NVCC = ["--deselect", "stage3_compiler/tests/test_cuda.py::test_rendered_kernels_compile_to_ptx"]


@nox.session
def asan(session: nox.Session) -> None:
    """Rebuild the C kernels with AddressSanitizer and run under it: stage1's conformance suite and
    tests; stage3's view, fusion and debug tests and its view and error conformance on the CPU
    (`nox -s asan_stage3` runs all of stage3; its forward suite alone takes ~30 min here)."""
    env = asan_env(session)
    install(session, "test")
    session.run("python", "-c", "import stage1_ndarray", env=env)
    session.run("pytest", "-q", *WORKERS, "-p", "no:cacheprovider", "conformance", "stage1_ndarray/tests",
                "--stage", "stage1_ndarray", "-k", "not dtype_extra", *session.posargs, env=env)
    # stage3's generated kernels, built with -fsanitize=address (runtime.sanitize_flags keys their cache).
    # The views suite is the one that reads through padded and flipped views: it caught an
    # out-of-bounds load of padded views in 10 s. ~2.5 min with a cold cache on 2 cores. The assign
    # and jit tests write buffers in place and replay kernels on planned memory.
    session.run("pytest", "-q", *WORKERS, "-p", "no:cacheprovider", "stage3_compiler/tests/test_views.py",
                "stage3_compiler/tests/test_fusion.py", "stage3_compiler/tests/test_debug.py",
                "stage3_compiler/tests/test_assign.py", "stage3_compiler/tests/test_jit.py",
                "conformance/test_views_hypothesis.py", "conformance/test_errors.py",
                "--stage", "stage3_compiler", "--device", "CPU", *session.posargs, env=env)


@nox.session(default=False)
def asan_stage3(session: nox.Session) -> None:
    """stage3's tests and its whole conformance suite on the CPU with AddressSanitizer-built kernels."""
    env = asan_env(session)
    install(session, "test", "torch")
    session.run("pytest", "-q", "-p", "no:cacheprovider", "stage3_compiler/tests", *NO_NVCC, "conformance",
                "--stage", "stage3_compiler", "--device", "CPU", *session.posargs, env=env)


@nox.session
def ptx(session: nox.Session) -> None:
    """Compile every CUDA source and every generated runtime kernel to PTX with nvcc (and assemble it)."""
    if shutil.which("nvcc") is None:
        session.skip("nvcc is not on PATH: the CUDA sources were not compiled")
    install(session)  # stage3's CUDA renderer writes the generated kernels (it imports numpy)
    session.run("python", "-m", "benchmarks.ptx_check", "--jobs", "2", *session.posargs)


@nox.session(default=False)
def fuzz(session: nox.Session) -> None:
    """The long hypothesis profile over views, indexing and broadcasting."""
    install(session, "test")
    session.run("pytest", "-q", "conformance/test_views_hypothesis.py", "--hypothesis-profile=fuzz",
                "--hypothesis-show-statistics", *session.posargs)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """pytest-benchmark of the stage kernels against numpy; JSON under benchmarks/results/."""
    install(session, "test")
    session.run("pytest", "benchmarks", "--benchmark-only", "--benchmark-json",
                "benchmarks/results/kernels.json", *session.posargs)
    session.run("python", "-m", "benchmarks.report", "benchmarks/results/kernels.json")


@nox.session(default=False)
def tinygrad_ops(session: nox.Session) -> None:
    """tinygrad 0.9.2's own op suite (from its source distribution on PyPI) against each stage, through the
    shim in benchmarks/tinygrad_ops.py: the pass fraction per stage and every failure, under $TMPDIR."""
    install(session, "test", "torch")
    tmp = session.create_tmp()
    session.run("pip", "download", "tinygrad==0.9.2", "--no-binary", ":all:", "--no-deps", "-d", tmp)
    for stage in ("1", "2", "3"):
        session.run("python", "-m", "benchmarks.tinygrad_ops", "--stage", stage, "--sdist",
                    os.path.join(tmp, "tinygrad-0.9.2.tar.gz"), "--report", os.path.join(tmp, f"stage{stage}.md"))


@nox.session(default=False)
def gemm(session: nox.Session) -> None:
    """The CPU GEMM ladder leaderboard: every variant x size, 1 and 2 threads, vs OpenBLAS and torch."""
    install(session, "test", "gemm")
    session.run("pytest", "-q", "benchmarks/test_gemm.py", "--benchmark-json", "benchmarks/results/gemm.json",
                *session.posargs)
    session.run("python", "-m", "benchmarks.gemm_leaderboard", "benchmarks/results/gemm.json")


@nox.session(default=False, venv_backend="none")
def gemm_cuda(session: nox.Session) -> None:
    """The CUDA GEMM ladder vs cuBLAS on a GPU, with the interpreter that has CuPy (GPU images ship it)."""
    # No venv: GPU machines are offline, and their image's python3 already holds CuPy and pytest-benchmark.
    session.run("python3", "-m", "pytest", "-q", "benchmarks/test_gemm_cuda.py", "--benchmark-json",
                "benchmarks/results/gemm_cuda.json", *session.posargs, external=True)
    session.run("python3", "-m", "benchmarks.gemm_cuda_leaderboard", "--write-headers", external=True)


@nox.session(default=False, venv_backend="none")
def cuda(session: nox.Session) -> None:
    """stage2's and stage3's cuda devices on a GPU: their device tests and the conformance suite on CuPy."""
    # No venv, as gemm_cuda: the GPU image's python3 holds CuPy (and torch, for the gradient checks).
    session.run("python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "stage2_autograd/tests/test_cuda_device.py",
                "conformance", "--stage", "stage2_autograd", "--device", "CUDA", *session.posargs,
                env={"SITP_CUDA_BACKEND": "cupy"}, external=True)
    session.run("python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "stage3_compiler/tests/test_cuda.py",
                "conformance", "--stage", "stage3_compiler", "--device", "CUDA", *session.posargs,
                env={"SITP_CUDA_BACKEND": "cupy"}, external=True)


@nox.session(default=False, venv_backend="none")
def diff(session: nox.Session) -> None:
    """The lesson between two stages in reading order: `nox -s diff -- 1 2 [--stat] [--no-tests]`."""
    # the interpreter running nox: the diff needs only the standard library, and `python` may not exist
    session.run(sys.executable, "-m", "common.stagediff", *session.posargs, external=True)
