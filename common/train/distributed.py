"""Data-parallel training across processes: one process a rank, started by MPI's launcher (mpi4py; the
`mpich` wheel from PyPI brings the MPI library and `mpiexec`, so a fresh machine needs no system
packages), talking MPI on the CPU and NCCL between GPUs (collectives.py).

The stages stay single-process: communication sits beside the training loop, on the stage's own
tensors (collectives.py moves them through the numpy door for MPI, or hands their device addresses
to NCCL). Each rank holds a whole replica of the model:
- Data: every rank draws the same global batch (world x batch_size rows) from the same seeded RNG
  and keeps its own slice, so 2 ranks x batch 6 see exactly the rows 1 rank x batch 12 sees, in the
  same order, and every rank's RNG stays equal to what a checkpoint saves.
- Gradients: after backward, each rank's mean-loss gradients (each rank's loss weighted by its share
  of the targets that count: see target_weights) are summed across ranks in buckets
  of about `bucket_bytes` (one Allreduce each, fewer and larger messages than one a parameter) and
  divided by the world size: the gradient of the global batch's mean loss.
- With `zero`, the optimizer is sharded as ZeRO stage 1 (nanochat's DistAdamW/DistMuon): each
  parameter has one owner rank (sizes balanced); gradients are reduce-scattered so each rank gets
  the summed gradients of its own parameters, clips with the global norm, steps the optimizer on
  those alone (a matrix stays whole, so Muon works too), and an all-gather hands every rank the
  new values of the others'. Each rank frees the optimizer state of the parameters it does not own,
  so it holds about 1/size of it; before a checkpoint the owners send theirs to rank 0, which writes
  the whole state and frees the others' again.
- Rank 0 alone logs, evaluates and writes checkpoints; every rank resumes from them.
- The model is built from one seed on every rank (the same initial weights); then each rank's stream
  of the stage's random numbers (dropout) is its own (seed_rank).
- A collective that does not finish within `timeout` seconds (a rank hangs) ends the job with an
  error naming the step (MPI_Abort), instead of waiting forever; a rank that dies ends the job at
  once (mpiexec stops the others).
- Gradients and parameters travel in flat buckets of about `bucket_bytes` (4 MiB), so that no step holds a
  second copy of the model. ZeRO's go in rounds, each rank's next run of its own parameters, padded
  to the longest run of the round (NCCL's reduce-scatter and all-gather take equal parts).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .collectives import Mpi, Nccl, nccl_library

BUCKET_MB = 4.0  # torch DDP's bucket_cap_mb is 25; our ranks share a CPU's caches
LAUNCHER_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MPI_LOCALRANKID")


class DistributedError(RuntimeError):
    pass


def bucket_mb(text: str) -> float:
    """The CLIs' --bucket-mb: a positive number of MiB."""
    value = float(text)
    if not value > 0:
        raise ValueError(f"--bucket-mb must be positive, got {text}")
    return value


@dataclass
class World:
    """This process's place among the ranks; size 1 without a launcher (no MPI is loaded then)."""

    rank: int = 0
    size: int = 1
    host: Mpi | None = None  # host-memory collectives: losses, counts, checks, the state for a checkpoint
    net: Mpi | Nccl | None = None  # the gradients' and parameters' collectives: MPI, or NCCL on GPUs
    local_size: int = 1  # the ranks on this machine, sharing its cores (or GPUs)
    zero: bool = False  # shard the optimizer (ZeRO-1) instead of all-reducing every gradient
    bucket_bytes: int = int(BUCKET_MB * 2**20)  # the size of one message of gradients or parameters

    @staticmethod
    def from_launcher(timeout: float = 60.0, device: str = "CPU") -> World:
        """The world mpiexec started this process in, or a world of one when no launcher did. On a
        cuda device the ranks exchange gradients with NCCL, one GPU each."""
        if not any(v in os.environ for v in LAUNCHER_VARS):
            return World()
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise DistributedError("distributed training needs mpi4py and an MPI library: "
                                   "pip install -e '.[dist]' (mpi4py and the mpich wheel)") from e
        comm = MPI.COMM_WORLD
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)  # the ranks sharing this machine's memory
        host = Mpi(comm, timeout)
        net = host
        if comm.Get_size() > 1 and str(device).lower().startswith("cuda"):
            net = Nccl(host, nccl_library(), local.Get_rank())
        return World(comm.Get_rank(), comm.Get_size(), host, net, local.Get_size())

    @staticmethod
    def start(stage: Any, ddp: bool, zero: bool = False, timeout: float = 60.0, bucket_mb: float = BUCKET_MB) -> World:
        """The CLIs' world: the launcher's with --ddp (each rank then takes its share of the cores),
        else a world of one. Call it after choosing the stage's device (Device.DEFAULT)."""
        device = getattr(getattr(stage, "Device", None), "DEFAULT", "CPU")
        world = World.from_launcher(timeout, device) if ddp else World()
        world.zero = zero
        world.bucket_bytes = max(1, int(bucket_mb * 2**20))
        if world.size > 1:
            stage.Tensor.set_num_threads(world.threads_per_rank())
        return world

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def comm_seconds(self) -> float:
        """Time spent in collectives, waiting for the other ranks included (the throughput report)."""
        return self.host.seconds if self.host is not None else 0.0

    def threads_per_rank(self) -> int:
        """The cores this process may use, shared among the ranks on this machine."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return max(1, cores // max(1, self.local_size))

    # ---- host-side exchanges ----

    def allreduce_sum(self, buf: np.ndarray, what: str = "allreduce") -> np.ndarray:
        """buf summed over the ranks, in place."""
        return buf if self.size == 1 else self.host.allreduce_sum(buf, what)

    def broadcast(self, buf: np.ndarray, what: str = "broadcast") -> np.ndarray:
        return buf if self.size == 1 else self.host.broadcast(buf, what)

    def barrier(self, what: str = "barrier") -> None:
        if self.size > 1:
            self.host.barrier(what)

    # ---- what training asks of it ----

    def shard(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This rank's rows of a global batch drawn identically on every rank."""
        if len(x) % self.size:
            raise ValueError(f"distributed: a global batch of {len(x)} rows does not split over {self.size} ranks")
        rows = len(x) // self.size
        return x[self.rank * rows:(self.rank + 1) * rows], y[self.rank * rows:(self.rank + 1) * rows]

    # ---- a step's exchange: pack (tensor ops), the collectives, unpack (tensor ops) ----
    # Packing and unpacking are tensor ops alone, so a jitted step (stage3) captures and replays them:
    # only the collectives run eagerly. All-reduce: buckets of gradients. ZeRO-1 (nanochat's
    # DistAdamW/DistMuon): each parameter has an owner rank; the gradients are reduce-scattered so
    # each rank gets the sums of its own, it steps those alone (a matrix stays whole, so Muon works
    # too), and an all-gather hands every rank the others' new values.

    def owners(self, params: list) -> list[int]:
        """The rank that updates each parameter: largest first, to the least loaded rank."""
        load, owner = [0] * self.size, [0] * len(params)
        for i in sorted(range(len(params)), key=lambda i: -params[i].numel()):
            owner[i] = load.index(min(load))
            load[owner[i]] += params[i].numel()
        return owner

    def _rounds(self, params: list) -> list[list[list[int]]]:
        """ZeRO's exchanges, in rounds of about bucket_bytes a rank, so that no step holds a second
        copy of the whole model: rounds[k][r] are the indices of rank r's k-th run of its own
        parameters (whole parameters, in order; empty when rank r has run out)."""
        owner = self.owners(params)
        runs = []
        for r in range(self.size):
            chunks, current, size = [], [], 0
            for i in (i for i in range(len(params)) if owner[i] == r):
                current.append(i)
                size += params[i].numel() * params[i].dtype.itemsize
                if size >= self.bucket_bytes:
                    chunks.append(current)
                    current, size = [], 0
            runs.append(chunks + ([current] if current else []))
        return [[run[k] if k < len(run) else [] for run in runs] for k in range(max(map(len, runs)))]

    @staticmethod
    def _run(stage: Any, tensors: list, length: int, dtype: Any, device: str) -> list:
        """The tensors flattened and cast to dtype, then zeros up to `length` elements in all."""
        pad = length - sum(t.numel() for t in tensors)
        zeros = [stage.Tensor.zeros(pad, dtype=dtype, device=device)] if pad else []
        return [t.reshape(-1).cast(dtype) for t in tensors] + zeros

    @staticmethod
    def _longest(params: list, rnd: list[list[int]]) -> int:
        return max(sum(params[i].numel() for i in part) for part in rnd)

    def pack(self, stage: Any, params: list, grads: list) -> list:
        """The gradients (None where a parameter has none) laid out for the exchange: all-reduce,
        flat buckets of about bucket_bytes of the present ones; ZeRO, a flat tensor a round."""
        if self.zero:  # every rank's run end to end, each padded to the round's longest (NCCL takes equal parts)
            T = stage.Tensor
            dtype, device = max((p.dtype for p in params), key=lambda d: d.itemsize), params[0].device
            return [_flat([piece for part in rnd for piece in self._run(
                stage, [grads[i] if grads[i] is not None else T.zeros(params[i].shape, dtype=dtype, device=device)
                        for i in part], self._longest(params, rnd), dtype, device)])
                for rnd in self._rounds(params)]
        return [_flat(bucket) for bucket in _buckets([g for g in grads if g is not None], self.bucket_bytes)]

    def exchange(self, packed: list, step: int) -> list:
        """Summed over the ranks: all-reduce, each bucket whole; ZeRO, this rank's part of each round."""
        if self.zero:
            return [self.net.reduce_scatter(t, f"the gradient reduce-scatter of step {step}") for t in packed]
        return [self.net.all_reduce(t, f"the gradient all-reduce of step {step}") for t in packed]

    def square_norm(self, stage: Any, received: list) -> Any:
        """ZeRO: the float64 sum of squares of this rank's averaged gradients (clip_scale adds the others')."""
        squares = [(r / self.size).cast(stage.dtypes.float64).square().sum() for r in received]
        return squares[0].stack(*squares[1:]).sum() if len(squares) > 1 else squares[0]

    def clip_scale(self, stage: Any, square: float, grad_clip: float, step: int) -> Any:
        """ZeRO: the factor on every gradient, as the stage's clip_grad_norm_ over all the ranks' parts:
        max_norm / (norm + 1e-6) when below 1, else 1 (x * 1.0 is x)."""
        coef = 1.0
        if grad_clip:
            total = math.sqrt(self.allreduce_sum(np.array([square]), f"the gradient norm of step {step}")[0])
            coef = min(grad_clip / (total + 1e-6), 1.0)
        return stage.Tensor(np.array([coef], np.float32))

    def unpack(self, params: list, received: list, has_grad: tuple[bool, ...], scale: Any = None) -> None:
        """Each parameter's gradient from what exchange received, divided by the number of ranks (and
        times ZeRO's clip scale). All-reduce: every parameter that had one (has_grad); ZeRO: the
        parameters this rank owns, the others None, so the optimizer steps its own alone."""
        for p in params:
            p.grad = None
        if self.zero:
            for rnd, part in zip(self._rounds(params), received, strict=True):
                start = 0
                for i in rnd[self.rank]:
                    p = params[i]
                    p.grad = ((part[start:start + p.numel()] / self.size) * scale).reshape(p.shape).cast(p.dtype)
                    start += p.numel()
            return
        k, start = 0, 0
        for p, has in zip(params, has_grad, strict=True):
            if has:
                if start == received[k].numel():
                    k, start = k + 1, 0
                p.grad = (received[k][start:start + p.numel()] / self.size).reshape(p.shape)
                start += p.numel()

    def pack_own(self, stage: Any, params: list) -> list:
        """ZeRO, after the update: this rank's new parameter values, its part of each round."""
        dtype, device = max((p.dtype for p in params), key=lambda d: d.itemsize), params[0].device
        return [_flat(self._run(stage, [params[i].detach() for i in rnd[self.rank]], self._longest(params, rnd),
                                dtype, device)) for rnd in self._rounds(params)]

    def gather(self, packed: list, step: int) -> list:
        """ZeRO: every rank's part of each round, laid end to end (the round's new values, whole)."""
        return [self.net.all_gather(t, f"the parameter all-gather of step {step}") for t in packed]

    def take_gathered(self, params: list, gathered: list) -> None:
        """ZeRO: the other ranks' parameters take their new values from the all-gathered rounds (in
        place: assign)."""
        theirs = []
        for rnd, whole in zip(self._rounds(params), gathered, strict=True):
            longest = whole.numel() // self.size
            for r, part in enumerate(rnd):
                start = r * longest
                for i in part:
                    p = params[i]
                    if r != self.rank:
                        theirs.append(p.assign(whole[start:start + p.numel()].reshape(p.shape)))
                    start += p.numel()
        if theirs:  # written now (stage3's assign is lazy; a jitted step must realize its assigns)
            theirs[0].realize(*theirs[1:])

    def own_buffers(self, params: list) -> None:
        """ZeRO, before the first step: every parameter a buffer of its own, so that the all-gather
        writes each in place. (On stage3 a parameter made as a view of another's memory would
        instead be rebound to the gathered values, and a jitted step, which reads the memory it
        captured, would go on reading the old values.)"""
        if self.size == 1 or not self.zero:
            return
        own_buffers(params)

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
        """Each parameter's optimizer state from its owner to rank 0 (one Gatherv on host memory, where
        the checkpoint goes anyway), so that rank 0's checkpoint is whole; rank 0 frees the others'
        part again after writing (drop_foreign_state)."""
        if self.size == 1 or not self.zero:
            return
        slots, owner = self._state_slots(opt)
        order = [k for r in range(self.size) for k in range(len(slots)) if owner[k] == r]
        sizes = [sub.params[j].numel() for sub, _, j in slots]  # a state buffer has its parameter's shape
        dtype = np.result_type(*[sub.state[slot][j].dtype.np for sub, slot, j in slots])
        mine = [sub.state[slot][j].numpy().astype(dtype, copy=False).ravel()
                for k, (sub, slot, j) in enumerate(slots) if owner[k] == self.rank]
        counts = [sum(sizes[k] for k in order if owner[k] == r) for r in range(self.size)]
        recv = self.host.gatherv(np.concatenate(mine) if mine else np.zeros(0, dtype), counts, 0,
                                 "the optimizer state gather")
        if recv is None:
            return
        start = 0
        for k in order:
            sub, slot, j = slots[k]
            if owner[k] != self.rank:
                buf = sub.state[slot][j]
                values = recv[start:start + sizes[k]].reshape(sub.params[j].shape)
                sub.state[slot][j] = stage.Tensor(values, dtype=buf.dtype, device=buf.device)
            start += sizes[k]

    def seed_rank(self, random_state: Any) -> None:
        """Each rank its own stream of the stage's random numbers (dropout), as nanoGPT's seed_offset:
        the seed mixed with the rank, the counter kept. Rank 0 keeps the seed, so its checkpoint holds
        the seed every rank derives its own from again on --resume, and every rank's draws advance the
        counter alike (the same ops on the same shapes), so a resumed run draws what it would have."""
        random_state.seed = (random_state.seed + self.rank * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF

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


def _flat(tensors: list) -> Any:
    """The tensors' elements end to end in a new 1-d tensor of its own (a collective may write into it)."""
    flat = [t.reshape(-1) for t in tensors]
    return flat[0].cat(*flat[1:]) if len(flat) > 1 else flat[0].clone()


def _buckets(grads: list, limit: int) -> list[list]:
    """The gradients in runs of about `limit` bytes, each of one dtype."""
    out, current, size = [], [], 0
    for g in grads:
        if current and g.dtype != current[0].dtype:
            out.append(current)
            current, size = [], 0
        current.append(g)
        size += g.numel() * g.dtype.itemsize
        if size >= limit:
            out.append(current)
            current, size = [], 0
    return out + ([current] if current else [])


def own_buffers(params: list) -> None:
    """Every parameter a realized buffer of its own (a copy of its value), which in-place updates write."""
    for p in params:
        p.assign(p.clone())
    params[0].realize(*params[1:])
