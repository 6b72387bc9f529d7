"""NCCL's calls answered on the CPU, for the CUDA emulator: how CI checks the cuda device's data-parallel
path (common/train/collectives.py's Nccl) without GPUs.

Under the emulator (common/cuda_emulation.py) a "device address" is an address in host memory, so
each NCCL call here views the send and receive addresses as numpy arrays of the call's count and
type, and starts the same collective over MPI on them, as NCCL would run it on the stream. An
event is done when every collective queued before it has completed, as a CUDA event on that stream.
What this checks: the addresses, counts, types and ordering the Nccl class hands NCCL, and every
rank's results. What only GPUs check: NCCL itself, and the stream ordering against real kernels.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

# NCCL's ncclDataType_t and ncclRedOp_t values (nccl.h), as cupy.cuda.nccl exports them
TYPES = {"int8": 0, "uint8": 1, "int32": 2, "int64": 4, "float16": 6, "float32": 7, "float64": 8}
NUMPY = {code: np.dtype(name) for name, code in TYPES.items()}


def _array(address: int, count: int, code: int) -> np.ndarray:
    dtype = NUMPY[code]
    return np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(address), dtype)


class EmulatedComm:
    """An NcclCommunicator's collectives (cupy.cuda.nccl's names and arguments) over MPI."""

    def __init__(self, comm: Any, pending: list):
        self.comm, self.pending = comm, pending

    def _start(self, request: Any, *arrays: np.ndarray) -> None:
        self.pending.append((request, arrays))  # the arrays stay alive until the request completes

    def allReduce(self, send: int, recv: int, count: int, datatype: int, op: int, stream: int) -> None:  # noqa: N802
        from mpi4py import MPI

        _check_op(op)
        out = _array(recv, count, datatype)
        source = MPI.IN_PLACE if send == recv else _array(send, count, datatype)
        self._start(self.comm.Iallreduce(source, out, op=MPI.SUM), out)

    def reduceScatter(self, send: int, recv: int, recvcount: int, datatype: int, op: int,  # noqa: N802
                      stream: int) -> None:
        from mpi4py import MPI

        _check_op(op)
        src, out = _array(send, recvcount * self.comm.Get_size(), datatype), _array(recv, recvcount, datatype)
        self._start(self.comm.Ireduce_scatter_block(src, out, op=MPI.SUM), src, out)

    def allGather(self, send: int, recv: int, count: int, datatype: int, stream: int) -> None:  # noqa: N802
        src, out = _array(send, count, datatype), _array(recv, count * self.comm.Get_size(), datatype)
        self._start(self.comm.Iallgather(src, out), src, out)

    def check_async_error(self) -> None:
        return None  # MPI reports a failed peer by ending the job

    def abort(self) -> None:
        self.pending.clear()


class EmulatedEvent:
    def __init__(self, pending: list):
        self.pending = pending

    @property
    def done(self) -> bool:
        while self.pending and self.pending[0][0].Test():
            self.pending.pop(0)
        return not self.pending


class EmulatedNccl:
    """The methods collectives.Nccl asks of CupyNccl, on host memory over MPI."""

    UNIQUE_ID_BYTES = 128
    SUM = 0  # ncclSum

    def __init__(self):
        self.pending: list = []  # the "stream": collectives queued and not yet complete, in order
        self.device: int | None = None

    def select_device(self, local_rank: int) -> None:
        self.device = local_rank  # one emulated GPU a rank: nothing to choose on the host

    def unique_id(self) -> tuple:
        return tuple(np.frombuffer(os.urandom(self.UNIQUE_ID_BYTES), np.int8).tolist())

    def communicator(self, size: int, uid: tuple, rank: int) -> EmulatedComm:
        from mpi4py import MPI

        world = MPI.COMM_WORLD
        if (size, rank) != (world.Get_size(), world.Get_rank()) or len(uid) != self.UNIQUE_ID_BYTES:
            raise ValueError(f"nccl (emulated): communicator of rank {rank} of {size} with a {len(uid)}-byte id, "
                             f"expected rank {world.Get_rank()} of {world.Get_size()} and {self.UNIQUE_ID_BYTES} bytes")
        if len(set(world.allgather(uid))) != 1:  # (NCCL would hang: the ranks must share rank 0's id)
            raise ValueError(f"nccl (emulated): rank {rank} was given another unique id than rank 0's")
        return EmulatedComm(world.Dup(), self.pending)

    def stream(self) -> int:
        return 0  # the default stream: the emulator runs every kernel at once, in order

    def record(self) -> EmulatedEvent:
        return EmulatedEvent(self.pending)

    def dtype(self, name: str) -> int | None:
        return TYPES.get(name)


def _check_op(op: int) -> None:
    if op != EmulatedNccl.SUM:
        raise ValueError(f"nccl (emulated): only ncclSum (0) is emulated, got op {op}")
