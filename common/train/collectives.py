"""The messages of data-parallel training, each with a deadline: MPI on host memory, NCCL on GPU memory.

distributed.py asks three things of the gradients' network, on flat 1-d tensors of the stage:

    all_reduce(t)        every rank's t summed, on every rank
    reduce_scatter(t)    t (world x n elements) summed over the ranks; rank r gets elements r*n..(r+1)*n
    all_gather(t)        every rank's t (n elements) laid end to end in rank order (world x n)

`Mpi` answers them through the numpy door (a tensor's values copied out, the collective on host
memory, a new tensor made from the result), with mpi4py; it also serves the host-side exchanges
(a loss, target counts, the optimizer state for a checkpoint). `Nccl` answers them in GPU memory
through CuPy's binding of NCCL: the tensors' device addresses (Tensor.data_ptr) go to NCCL, which
reads and writes them in place, ordered after the kernels that made them on the same stream; the
host never sees the values. MPI still starts the ranks and hands NCCL its unique id.

Every collective is non-blocking and polled against `timeout`: when another rank dies or hangs,
this one says which collective did not complete, and ends the job (MPI_Abort; NCCL's communicator
is aborted first) instead of waiting forever. A Python exception would not do: the pending
collective would keep MPI's finalize, and the job, waiting.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np


class Mpi:
    """Collectives on host memory over an MPI communicator (mpi4py)."""

    name = "mpi"

    def __init__(self, comm: Any, timeout: float):
        self.comm, self.timeout = comm, timeout
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.seconds = 0.0  # spent in collectives, waiting for the others included
        self.on_abort: list = []  # called before MPI_Abort (Nccl aborts its communicator)

    def wait(self, done: Any, what: str) -> None:
        """Poll done() until it is true or the deadline passes; then end the job, saying why."""
        start = time.perf_counter()
        deadline, pause = start + self.timeout, 1e-5
        while not done():
            if time.perf_counter() > deadline:
                self.abort(f"{what} did not complete within {self.timeout:.0f} s: another rank died or hangs")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        self.seconds += time.perf_counter() - start

    def abort(self, why: str) -> None:
        print(f"sitp: error: rank {self.rank}/{self.size}: {why}; aborting the job", file=sys.stderr, flush=True)
        for hook in self.on_abort:
            hook()
        time.sleep(1.0)  # for mpiexec to forward the line: the abort kills the ranks' pipes with them
        self.comm.Abort(1)

    def _run(self, request: Any, what: str) -> None:
        self.wait(request.Test, what)

    # ---- numpy arrays ----

    def allreduce_sum(self, buf: np.ndarray, what: str) -> np.ndarray:
        """buf summed over the ranks, in place."""
        from mpi4py import MPI

        self._run(self.comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.SUM), what)
        return buf

    def broadcast(self, buf: np.ndarray, what: str) -> np.ndarray:
        """Rank 0's buf, in place on every rank."""
        self._run(self.comm.Ibcast(buf, root=0), what)
        return buf

    def barrier(self, what: str) -> None:
        self._run(self.comm.Ibarrier(), what)

    def gatherv(self, send: np.ndarray, counts: list[int], root: int, what: str) -> np.ndarray | None:
        """Each rank's send (counts[rank] elements) end to end in rank order, on root alone."""
        recv = np.empty(sum(counts), send.dtype) if self.rank == root else None
        self._run(self.comm.Igatherv(send, [recv, counts] if recv is not None else None, root=root), what)
        return recv

    # ---- the stage's tensors, through the numpy door ----

    def all_reduce(self, t: Any, what: str) -> Any:
        buf = np.require(t.numpy(), requirements=["C", "W"])  # (a writable host array for MPI to sum into)
        return type(t)(self.allreduce_sum(buf, what), dtype=t.dtype, device=t.device)

    def reduce_scatter(self, t: Any, what: str) -> Any:
        from mpi4py import MPI

        send = np.ascontiguousarray(t.numpy())
        recv = np.empty(len(send) // self.size, send.dtype)
        self._run(self.comm.Ireduce_scatter_block(send, recv, op=MPI.SUM), what)
        return type(t)(recv, dtype=t.dtype, device=t.device)

    def all_gather(self, t: Any, what: str) -> Any:
        send = np.ascontiguousarray(t.numpy())
        recv = np.empty(len(send) * self.size, send.dtype)
        self._run(self.comm.Iallgather(send, recv), what)
        return type(t)(recv, dtype=t.dtype, device=t.device)


class Nccl:
    """The three tensor collectives in GPU memory, on NCCL (`lib`: CupyNccl, or a stand-in with its
    methods such as common/nccl_emulation.py's); `host` (Mpi) bootstraps it and ends the job on a
    deadline."""

    name = "nccl"

    def __init__(self, host: Mpi, lib: Any, local_rank: int):
        self.host, self.lib = host, lib
        self.rank, self.size = host.rank, host.size
        lib.select_device(local_rank)  # one GPU a process: before the first cuda tensor
        uid = np.zeros(lib.UNIQUE_ID_BYTES, np.int8)
        if self.rank == 0:
            uid[:] = lib.unique_id()
        host.broadcast(uid, "sharing NCCL's unique id")
        self.comm = lib.communicator(self.size, tuple(int(b) for b in uid), self.rank)
        host.on_abort.append(self.comm.abort)

    @property
    def seconds(self) -> float:
        return self.host.seconds

    def _run(self, call: Any, what: str) -> None:
        """Queue one NCCL call on the stream the stage's kernels use, then wait (deadline) for it."""
        call(self.lib.stream())
        event = self.lib.record()

        def done() -> bool:
            try:
                self.comm.check_async_error()  # NCCL saw a peer fail: end the job now, not at the deadline
            except Exception as e:  # (CuPy's NcclError)
                self.host.abort(f"{what} failed in NCCL ({type(e).__name__}: {e})")
            return event.done

        self.host.wait(done, what)

    def _code(self, t: Any) -> int:
        code = self.lib.dtype(t.dtype.name)
        if code is None:
            raise TypeError(f"nccl: no NCCL type for dtype {t.dtype.name} (tensor of shape {t.shape})")
        return code

    def all_reduce(self, t: Any, what: str) -> Any:
        t = t.contiguous()
        n, ptr = t.numel(), t.data_ptr()  # (in place: t is a bucket made for this call, no one else reads it)
        self._run(lambda s: self.comm.allReduce(ptr, ptr, n, self._code(t), self.lib.SUM, s), what)
        return t

    def reduce_scatter(self, t: Any, what: str) -> Any:
        t = t.contiguous()
        n = t.numel() // self.size
        out = type(t).zeros(n, dtype=t.dtype, device=t.device).contiguous()
        send, recv = t.data_ptr(), out.data_ptr()
        self._run(lambda s: self.comm.reduceScatter(send, recv, n, self._code(t), self.lib.SUM, s), what)
        return out

    def all_gather(self, t: Any, what: str) -> Any:
        t = t.contiguous()
        n = t.numel()
        out = type(t).zeros(n * self.size, dtype=t.dtype, device=t.device).contiguous()
        send, recv = t.data_ptr(), out.data_ptr()
        self._run(lambda s: self.comm.allGather(send, recv, n, self._code(t), s), what)
        return out


class CupyNccl:
    """NCCL as CuPy binds it (cupy.cuda.nccl), with the current device, stream and events."""

    UNIQUE_ID_BYTES = 128
    TYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32", "int64": "NCCL_INT64",
             "float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64"}

    def __init__(self):
        try:
            import cupy
            from cupy.cuda import nccl
        except ImportError as e:
            raise RuntimeError("data-parallel on cuda needs CuPy with NCCL: pip install -e '.[cuda]' "
                               "(CuPy's wheels bring NCCL)") from e
        self.cupy, self.nccl = cupy, nccl
        self.SUM = nccl.NCCL_SUM

    def select_device(self, local_rank: int) -> None:
        self.cupy.cuda.Device(local_rank % self.cupy.cuda.runtime.getDeviceCount()).use()

    def unique_id(self) -> tuple:
        return self.nccl.get_unique_id()

    def communicator(self, size: int, uid: tuple, rank: int) -> Any:
        return self.nccl.NcclCommunicator(size, uid, rank)

    def stream(self) -> int:
        return self.cupy.cuda.get_current_stream().ptr

    def record(self) -> Any:
        event = self.cupy.cuda.Event(disable_timing=True)
        event.record()
        return event  # .done: every call queued before it has finished

    def dtype(self, name: str) -> int | None:
        return getattr(self.nccl, self.TYPES[name]) if name in self.TYPES else None


_nccl_library: list = []


def use_nccl(lib: Any) -> None:
    """Answer NCCL's calls with `lib` (common/nccl_emulation.py's EmulatedNccl under
    SITP_CUDA_BACKEND=emulate) instead of CuPy's."""
    _nccl_library[:] = [lib]


def nccl_library() -> Any:
    return _nccl_library[0] if _nccl_library else CupyNccl()
