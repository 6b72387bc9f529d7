"""Data-parallel training on MPI (common/train/distributed.py), run for real: `mpiexec -n 2` from the
mpich wheel starts two ranks of `sitp train nanogpt --ddp` on a small model.

- 2 ranks x batch 6 reproduce 1 rank x batch 12 on stage2 and stage3, with the gradients
  all-reduced or the optimizer sharded (ZeRO-1): the same losses and parameters to within float32
  reduction-order noise (the gradients are summed in another order).
- On the cuda device the same through NCCL, on the CUDA emulator with NCCL's calls answered over MPI.
- Kill one rank mid-run: the job exits non-zero within 60 s; `--resume` then continues from the
  last checkpoint bit for bit, to the uninterrupted run's losses and weights.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="distributed training needs mpi4py and the mpich wheel: pip install -e '.[dist]'")
MPIEXEC = shutil.which("mpiexec") or str(Path(sys.executable).parent / "mpiexec")
if not Path(MPIEXEC).exists():
    pytest.skip("no mpiexec (pip install -e '.[dist]' brings mpich's)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--eval-batches", "2", "--set", "n_layer=1", "--set", "n_embd=32", "--set", "n_head=2",
         "--set", "block_size=32", "--samples", "0", "--tokens", "0", "--quiet"]


def _train(out: Path, *flags: str, ranks: int = 1, stage: str = "2", emulate: bool = False) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "common.cli", "train", "nanogpt", "--stage", stage, *SMALL, "--out", str(out), *flags]
    if ranks > 1:
        cmd = [MPIEXEC, "-n", str(ranks), *cmd, "--ddp"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **({"SITP_CUDA_BACKEND": "emulate"} if emulate else {})}
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 300) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-3000:]
    return out


def _state(out: Path):
    from common.train.checkpoint import load_checkpoint

    ckpt = load_checkpoint(out / "ckpt.safetensors")
    return np.array(ckpt.train_losses), {k: ckpt.model[k] for k in ckpt.model.keys()}


@pytest.mark.parametrize("stage, sharded", [("2", False), ("2", True), ("3", False)])
def test_two_ranks_reproduce_one_rank_with_the_whole_batch(tmp_path, stage, sharded):
    steps = ["--steps", "60", "--eval-every", "0", "--bucket-mb", "0.004"]  # (several buckets, and ZeRO rounds)
    _finish(_train(tmp_path / "one", *steps, "--batch-size", "12", stage=stage))
    two = _finish(_train(tmp_path / "two", *steps, "--batch-size", "6", *(["--zero"] if sharded else []), ranks=2,
                         stage=stage))
    if sharded:  # each rank keeps the optimizer state of its own parameters only: about half of it
        found = re.search(r"rank 0 holds ([\d.]+) MiB of optimizer state of ([\d.]+) MiB", two)
        held, whole = map(float, found.groups())
        assert 0 < held < 0.75 * whole, two[-2000:]
    (l1, w1), (l2, w2) = _state(tmp_path / "one"), _state(tmp_path / "two")
    np.testing.assert_allclose(l2, l1, rtol=1e-5)
    assert w1.keys() == w2.keys()
    for k in w1:
        np.testing.assert_allclose(w2[k], w1[k], rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("stage, steps, sharded", [("3", "20", False), ("3", "20", True), ("2", "3", False)],
                         ids=["stage3", "stage3-zero", "stage2"])
def test_nccl_ranks_on_the_emulated_cuda_device(tmp_path, stage, steps, sharded):
    """On cuda the gradients and parameters go through NCCL, in device memory: here the CUDA emulator's
    memory, each NCCL call answered over MPI (common/nccl_emulation.py). Same goal as above. (stage2's
    emulated GEMM runs a CUDA thread an OS thread: 3 steps take 40 s.)"""
    flags = ["--steps", steps, "--eval-every", "0", "--device", "cuda", "--bucket-mb", "0.004"]
    _finish(_train(tmp_path / "one", *flags, "--batch-size", "12", stage=stage, emulate=True))
    two = _finish(_train(tmp_path / "two", *flags, "--batch-size", "6", *(["--zero"] if sharded else []), ranks=2,
                         stage=stage, emulate=True))
    assert "data-parallel on nccl: 2 ranks" in two, two[-2000:]
    (l1, w1), (l2, w2) = _state(tmp_path / "one"), _state(tmp_path / "two")
    np.testing.assert_allclose(l2, l1, rtol=1e-5)
    for k in w1:
        np.testing.assert_allclose(w2[k], w1[k], rtol=1e-4, atol=1e-5, err_msg=k)


def _rank_pid(out: Path, rank: int) -> int | None:
    """The pid of the training process of `rank` whose command line names `out`."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"common.cli" in cmdline and str(out).encode() in cmdline and f"PMI_RANK={rank}".encode() in environ:
            return int(proc.name)
    return None


def _signal_rank_1(job: subprocess.Popen, out: Path, sig: int) -> str:
    """Send rank 1 `sig` once the job has written its first checkpoint (both ranks are then in the
    training loop: a rank stopped inside MPI's start-up would hang the job for good), and return the
    job's output once it ends, which must be within 60 s."""
    deadline = time.monotonic() + 120
    while not (out / "ckpt.safetensors").exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = _rank_pid(out, 1)
    assert job.poll() is None and pid is not None, "the job is not training"
    os.kill(pid, sig)
    sent = time.monotonic()
    try:
        output, _ = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        pytest.fail(f"the job still ran 60 s after rank 1 got signal {sig}")
    finally:
        try:
            os.kill(pid, signal.SIGKILL)  # (a stopped rank mpiexec left behind)
        except ProcessLookupError:
            pass
    print(f"the job exited {job.returncode} {time.monotonic() - sent:.1f} s after rank 1 got signal {sig}")
    return output


@pytest.mark.parametrize("sharded", [False, True], ids=["allreduce", "zero"])
def test_a_killed_rank_ends_the_job_and_resume_is_exact(tmp_path, sharded):
    """(Sharded, the checkpoint holds the optimizer state every owner sent rank 0. With dropout, so
    that each rank's own stream of random numbers must resume where it was too.)"""
    run = ["--steps", "300", "--eval-every", "0", "--ckpt-every", "10", "--batch-size", "6", "--set", "dropout=0.1",
           *(["--zero"] if sharded else [])]
    _finish(_train(tmp_path / "whole", *run, ranks=2))
    job = _train(tmp_path / "cut", *run, ranks=2)
    output = _signal_rank_1(job, tmp_path / "cut", signal.SIGKILL)
    assert job.returncode != 0, output[-2000:]
    done = _finish(_train(tmp_path / "cut", *run, "--resume", ranks=2))
    assert "resumed from" in done
    (l1, w1), (l2, w2) = _state(tmp_path / "whole"), _state(tmp_path / "cut")
    np.testing.assert_array_equal(l2, l1)
    for k in w1:
        np.testing.assert_array_equal(w2[k], w1[k], err_msg=k)


@pytest.mark.parametrize("device", ["cpu", "cuda"], ids=["mpi", "nccl-emulated"])
def test_a_hung_rank_times_out_the_others(tmp_path, device):
    """A rank that stops answering (SIGSTOP) leaves the others waiting in a collective: they give
    up after --ddp-timeout with an error that says so (on cuda, waiting on NCCL's stream)."""
    job = _train(tmp_path / "hang", "--steps", "100000", "--eval-every", "0", "--batch-size", "6",
                 "--ckpt-every", "10", "--ddp-timeout", "5", "--device", device, ranks=2,
                 stage="3" if device == "cuda" else "2", emulate=device == "cuda")
    output = _signal_rank_1(job, tmp_path / "hang", signal.SIGSTOP)
    assert job.returncode != 0
    assert "did not complete within 5 s" in output, output[-2000:]


def _nanochat(out: Path, *flags: str, ranks: int = 1) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "common.cli", "nanochat", "--stage", "2", "--depth", "1", "--vocab-size", "300",
           "--sequence-len", "32", "--steps", "base=20", "--steps", "mid=10", "--steps", "sft=10", "--chat-seeds", "1",
           "--quiet", "--out", str(out), *flags]
    if ranks > 1:
        cmd = [MPIEXEC, "-n", str(ranks), *cmd, "--ddp"]
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_nanochat_pipeline_on_two_ranks_with_a_sharded_muon(tmp_path):
    """Every phase (base, mid, SFT) of nanochat on 2 ranks x 4 rows with Muon and AdamW sharded gives
    1 rank x 8 rows' losses. SFT counts only the assistant's tokens, a different number on each rank,
    so this also checks the target weights (World.target_weights)."""
    _finish(_nanochat(tmp_path / "one", "--batch-size", "8"))
    _finish(_nanochat(tmp_path / "two", "--batch-size", "4", "--zero", ranks=2))
    from common.train.checkpoint import load_checkpoint

    for phase in ("base", "mid", "sft"):
        one = load_checkpoint(tmp_path / "one" / phase / "ckpt.safetensors")
        two = load_checkpoint(tmp_path / "two" / phase / "ckpt.safetensors")
        np.testing.assert_allclose(two.train_losses, one.train_losses, rtol=1e-5, err_msg=phase)


def test_each_rank_draws_its_own_random_numbers():
    """seed_rank: rank 0 keeps one rank's stream (so its checkpoint serves every rank's resume), the
    others draw their own (dropout masks), from the same counter."""
    import stage2_autograd as stage
    from common.train.checkpoint import stage_random
    from common.train.distributed import World

    draws = []
    for rank in (None, 0, 1):
        stage.Tensor.manual_seed(7)
        if rank is not None:
            World(rank=rank, size=2).seed_rank(stage_random(stage))
        draws.append(stage.Tensor.rand(16).numpy())
    np.testing.assert_array_equal(draws[1], draws[0])
    assert not np.allclose(draws[2], draws[0])
