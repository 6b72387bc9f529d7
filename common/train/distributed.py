"""Data-parallel training across processes on MPI (mpi4py; the `mpich` wheel from PyPI brings the MPI
library and `mpiexec`, so a fresh machine needs no system packages).

The stages stay single-process: communication sits beside the training loop and goes through the
numpy door, the way data comes in. Each rank holds a whole replica of the model:
- Data: every rank draws the same global batch (world x batch_size rows) from the same seeded RNG
  and keeps its own slice, so 2 ranks x batch 6 see exactly the rows 1 rank x batch 12 sees, in the
  same order, and every rank's RNG stays equal to what a checkpoint saves.
- Gradients: after backward, each rank's mean-loss gradients (each rank's loss weighted by its share
  of the targets that count: see target_weights) are summed across ranks in buckets
  of about BUCKET_BYTES (one Allreduce each, fewer and larger messages than one a parameter) and
  divided by the world size: the gradient of the global batch's mean loss.
- With `zero`, the optimizer is sharded as ZeRO stage 1 (nanochat's DistAdamW/DistMuon): each
  parameter has one owner rank (sizes balanced); gradients are reduce-scattered so each rank gets
  the summed gradients of its own parameters, clips with the global norm, steps the optimizer on
  those alone (a matrix stays whole, so Muon works too), and an all-gather hands every rank the
  new values of the others'. Each rank frees the optimizer state of the parameters it does not own,
  so it holds about 1/size of it; before a checkpoint the owners send theirs to rank 0, which writes
  the whole state and frees the others' again.
- Rank 0 alone logs, evaluates and writes checkpoints; every rank resumes from them.
- A collective that does not finish within `timeout` seconds (a rank hangs) ends the job with an
  error naming the step (MPI_Abort), instead of waiting forever; a rank that dies ends the job at
  once (mpiexec stops the others).
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

BUCKET_BYTES = 4 << 20
LAUNCHER_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MPI_LOCALRANKID")


class DistributedError(RuntimeError):
    pass


@dataclass
class World:
    """This process's place among the ranks; size 1 without a launcher (no MPI is loaded then)."""

    rank: int = 0
    size: int = 1
    comm: Any = None
    timeout: float = 60.0
    zero: bool = False  # shard the optimizer (ZeRO-1) instead of all-reducing every gradient
    comm_seconds: float = 0.0  # time spent in collectives, for the throughput report

    @staticmethod
    def from_launcher(timeout: float = 60.0) -> World:
        """The world mpiexec started this process in, or a world of one when no launcher did."""
        if not any(v in os.environ for v in LAUNCHER_VARS):
            return World(timeout=timeout)
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise DistributedError("distributed training needs mpi4py and an MPI library: "
                                   "pip install -e '.[dist]' (mpi4py and the mpich wheel)") from e
        comm = MPI.COMM_WORLD
        return World(comm.Get_rank(), comm.Get_size(), comm, timeout)

    @staticmethod
    def start(stage: Any, ddp: bool, zero: bool = False, timeout: float = 60.0) -> World:
        """The CLIs' world: the launcher's with --ddp (each rank then takes its share of the cores),
        else a world of one."""
        world = World.from_launcher(timeout) if ddp else World()
        world.zero = zero
        if world.size > 1:
            stage.Tensor.set_num_threads(world.threads_per_rank())
        return world

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def threads_per_rank(self) -> int:
        """The cores this process may use, shared among the ranks on this machine."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        local = int(os.environ.get("MPI_LOCALNRANKS", os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", self.size)))
        return max(1, cores // max(1, local))

    # ---- collectives, each with a deadline ----

    def _wait(self, request: Any, what: str) -> None:
        """Poll a non-blocking collective until it completes or the deadline passes."""
        start = time.perf_counter()
        deadline = start + self.timeout
        pause = 1e-5
        while not request.Test():
            if time.perf_counter() > deadline:
                # An exception would leave the collective pending, and MPI's finalize at exit would wait
                # for it forever: say why, then end the whole job (mpiexec stops every rank).
                print(f"sitp: error: rank {self.rank}/{self.size}: {what} did not complete within "
                      f"{self.timeout:.0f} s: another rank died or hangs; aborting the job",
                      file=sys.stderr, flush=True)
                time.sleep(1.0)  # for mpiexec to forward the line: the abort kills the ranks' pipes with them
                self.comm.Abort(1)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        self.comm_seconds += time.perf_counter() - start

    def allreduce_sum(self, buf: np.ndarray, what: str = "allreduce") -> np.ndarray:
        """buf summed over the ranks, in place."""
        if self.size == 1:
            return buf
        from mpi4py import MPI

        self._wait(self.comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.SUM), what)
        return buf

    def broadcast(self, buf: np.ndarray, what: str = "broadcast") -> np.ndarray:
        if self.size > 1:
            self._wait(self.comm.Ibcast(buf, root=0), what)
        return buf

    def barrier(self, what: str = "barrier") -> None:
        if self.size > 1:
            self._wait(self.comm.Ibarrier(), what)

    # ---- what training asks of it ----

    def shard(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This rank's rows of a global batch drawn identically on every rank."""
        if len(x) % self.size:
            raise ValueError(f"distributed: a global batch of {len(x)} rows does not split over {self.size} ranks")
        rows = len(x) // self.size
        return x[self.rank * rows:(self.rank + 1) * rows], y[self.rank * rows:(self.rank + 1) * rows]

    def average_gradients(self, stage: Any, params: list, step: int) -> None:
        """Each parameter's gradient replaced by its mean over the ranks, bucket by bucket."""
        if self.size == 1:
            return
        T = stage.Tensor
        with_grad = [p for p in params if p.grad is not None]
        for bucket in _buckets(with_grad):
            flat = np.concatenate([p.grad.numpy().ravel() for p in bucket])
            self.allreduce_sum(flat, f"the gradient all-reduce of step {step}")
            flat /= self.size
            start = 0
            for p in bucket:
                n = p.grad.numel()
                p.grad = T(flat[start:start + n].reshape(p.grad.shape), dtype=p.grad.dtype, device=p.grad.device)
                start += n

    # ---- ZeRO-1: each rank updates the parameters it owns ----

    def owners(self, params: list) -> list[int]:
        """The rank that updates each parameter: largest first, to the least loaded rank."""
        load, owner = [0] * self.size, [0] * len(params)
        for i in sorted(range(len(params)), key=lambda i: -params[i].numel()):
            owner[i] = load.index(min(load))
            load[owner[i]] += params[i].numel()
        return owner

    def _gather_owned(self, tensors: list, owner: list[int], shapes: list[tuple], what: str,
                      root: int | None = None) -> list[np.ndarray | None]:
        """The values of each tensor (of shapes[i]) from the rank that owns it, to every rank (one
        Allgatherv) or to `root` alone (one Gatherv; the others get Nones). A rank reads only the
        tensors it owns: the others may be empty placeholders."""
        order = [i for r in range(self.size) for i in range(len(tensors)) if owner[i] == r]
        sizes = [math.prod(shape) for shape in shapes]
        dtype = np.result_type(*[t.dtype.np for t in tensors])
        counts = [sum(sizes[i] for i in order if owner[i] == r) for r in range(self.size)]
        mine = [tensors[i].numpy().astype(dtype, copy=False).ravel() for i in order if owner[i] == self.rank]
        send = np.concatenate(mine) if mine else np.zeros(0, dtype)
        receives = root is None or root == self.rank
        recv = np.empty(sum(counts) if receives else 0, dtype)
        if root is None:
            self._wait(self.comm.Iallgatherv(send, [recv, counts]), what)
        else:
            self._wait(self.comm.Igatherv(send, [recv, counts] if receives else None, root=root), what)
        out, start = [None] * len(tensors), 0
        for i in order:
            if receives:
                out[i] = recv[start:start + sizes[i]].reshape(shapes[i])
            start += sizes[i]
        return out

    def sharded_step(self, stage: Any, opt: Any, grad_clip: float, step: int) -> None:
        """Reduce-scatter the gradients, clip by the global norm, step this rank's parameters, all-gather."""
        from mpi4py import MPI

        T, params = stage.Tensor, opt.params
        owner = self.owners(params)
        order = [i for r in range(self.size) for i in range(len(params)) if owner[i] == r]
        counts = [sum(params[i].numel() for i in order if owner[i] == r) for r in range(self.size)]
        dtype = np.result_type(*[p.dtype.np for p in params])
        flat = np.concatenate([params[i].grad.numpy().astype(dtype, copy=False).ravel() if params[i].grad is not None
                               else np.zeros(params[i].numel(), dtype) for i in order])
        mine = np.empty(counts[self.rank], dtype)
        self._wait(self.comm.Ireduce_scatter(flat, mine, counts, op=MPI.SUM),
                   f"the gradient reduce-scatter of step {step}")
        mine /= self.size
        if grad_clip:  # torch's clip_grad_norm_, on the norm of all the ranks' gradients together
            total = float(np.sqrt(self.allreduce_sum(np.array([np.square(mine, dtype=np.float64).sum()]),
                                                     f"the gradient norm of step {step}")[0]))
            coef = grad_clip / (total + 1e-6)
            if coef < 1:
                mine *= np.asarray(coef, dtype)
        start = 0
        for i in order:
            p = params[i]
            if owner[i] == self.rank:
                n = p.numel()
                p.grad = T(mine[start:start + n].reshape(p.shape), dtype=p.dtype, device=p.device)
                start += n
            else:
                p.grad = None  # the optimizer skips it: its owner updates it
        opt.step()
        gathered = self._gather_owned(params, owner, [p.shape for p in params],
                                      f"the parameter all-gather of step {step}")
        for i, (p, values) in enumerate(zip(params, gathered, strict=True)):
            if owner[i] != self.rank:
                p.assign(T(values, dtype=p.dtype, device=p.device))

    def _state_slots(self, opt: Any) -> tuple[list, list[int]]:
        """Every optimizer state buffer as (optimizer, slot, index), and the rank owning its parameter."""
        owner = dict(zip(map(id, opt.params), self.owners(opt.params), strict=True))
        slots = [(sub, slot, j) for sub in getattr(opt, "optimizers", [opt]) for slot in sub.state
                 for j in range(len(sub.params))]
        return slots, [owner[id(sub.params[j])] for sub, _, j in slots]

    def drop_foreign_state(self, stage: Any, opt: Any) -> None:
        """ZeRO's memory saving: free the state of the parameters other ranks own (an empty tensor in
        its place; the optimizer never reads it, as those parameters have no gradient here)."""
        if self.size == 1 or not self.zero:
            return
        for (sub, slot, j), owner in zip(*self._state_slots(opt), strict=True):
            buf = sub.state[slot][j]
            if owner != self.rank and buf.numel():
                sub.state[slot][j] = stage.Tensor.zeros(0, dtype=buf.dtype, device=buf.device)

    @staticmethod
    def state_bytes(opt: Any, whole: bool = False) -> int:
        """The optimizer state this rank holds (whole: what it would hold unsharded)."""
        return sum((p.numel() if whole else b.numel()) * b.dtype.itemsize for sub in getattr(opt, "optimizers", [opt])
                   for bufs in sub.state.values() for p, b in zip(sub.params, bufs, strict=True))

    def gather_optimizer_state(self, stage: Any, opt: Any) -> None:
        """Each parameter's optimizer state from its owner to rank 0 (one Gatherv), so that rank 0's
        checkpoint is whole; rank 0 frees the others' part again after writing (drop_foreign_state)."""
        if self.size == 1 or not self.zero:
            return
        slots, owner = self._state_slots(opt)
        shapes = [sub.params[j].shape for sub, _, j in slots]  # a state buffer has its parameter's shape
        values = self._gather_owned([sub.state[slot][j] for sub, slot, j in slots], owner, shapes,
                                    "the optimizer state gather", root=0)
        if not self.is_main:
            return
        for (sub, slot, j), rank, v in zip(slots, owner, values, strict=True):
            if rank != self.rank:
                buf = sub.state[slot][j]
                sub.state[slot][j] = stage.Tensor(v, dtype=buf.dtype, device=buf.device)

    def target_weights(self, ys: list[np.ndarray]) -> list[float]:
        """For each micro-batch, this rank's weight on its mean loss: size x (its targets / all ranks'
        targets). A loss averaged over the targets that count (labels of -1 are ignored: padding, the
        prompt in SFT) gives each rank's mean a different number of terms, and only these weights make
        the ranks' averaged gradients the gradient of the global batch's mean."""
        mine = np.array([(y != -1).sum() if y.dtype.kind in "iu" else len(y) for y in ys], np.float64)
        total = self.allreduce_sum(mine.copy(), "the target count")
        return [self.size * m / t if t else 1.0 for m, t in zip(mine, total, strict=True)]

    def mean(self, value: float, what: str) -> float:
        """A Python float averaged over the ranks (the step's loss)."""
        if self.size == 1:
            return value
        return float(self.allreduce_sum(np.array([value], np.float64), what)[0]) / self.size

    def check_same_parameters(self, params: list) -> None:
        """Every rank starts from rank 0's parameters (the same seed builds the same model; this
        makes sure and says so if not)."""
        if self.size == 1:
            return
        flat = np.concatenate([p.numpy().astype(np.float64).ravel() for p in params])
        mine = np.array([flat.sum(), np.abs(flat).sum()])
        theirs = self.broadcast(mine.copy(), "the parameter check")
        if not np.array_equal(mine, theirs):
            raise DistributedError(f"rank {self.rank}: its initial parameters differ from rank 0's")


def _buckets(params: list) -> list[list]:
    out, current, size = [], [], 0
    for p in params:
        current.append(p)
        size += p.grad.numel() * p.grad.dtype.itemsize
        if size >= BUCKET_BYTES:
            out.append(current)
            current, size = [], 0
    return out + ([current] if current else [])
