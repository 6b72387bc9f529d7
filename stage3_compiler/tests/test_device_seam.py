"""The foundation every stage shares, in the compiler's terms: a kernel that fails to compile raises
with its source (also under `python -O`, which drops asserts), every creation method takes a
device, ops keep their operands' device, and `realize` takes other tensors as tinygrad's does."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .. import Tensor, dtypes
from ..buffer import ALIGN, Buffer
from ..codegen.program import CompileError
from ..cpu.compiler import compile_c

STAGE = Path(__file__).resolve().parents[1].name


def test_a_compile_error_names_the_kernel_and_shows_its_source():
    with pytest.raises(CompileError, match=r"(?s)compile of kernel broken failed.*void broken"):
        compile_c("void broken(void) { this is not C; }", "broken")


def test_python_O_computes_the_same():
    code = (f"import numpy as np\nfrom {STAGE} import Tensor\n"
            "x = Tensor(np.arange(6, dtype=np.float32))\n"
            "print(x.exp().numpy().round(3).tolist())\nprint(x.reshape(2, 3).T.contiguous().numpy().tolist())\n")
    done = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2], env={**os.environ})
    assert done.returncode == 0, done.stderr
    values, transposed = done.stdout.splitlines()
    assert values == str(np.exp(np.arange(6, dtype=np.float32)).round(3).tolist())
    assert transposed == "[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]"


@pytest.mark.parametrize("make", [
    lambda d: Tensor([1.0], device=d), lambda d: Tensor.zeros(2, device=d), lambda d: Tensor.ones(2, device=d),
    lambda d: Tensor.full((2,), 3, device=d), lambda d: Tensor.empty(2, device=d),
    lambda d: Tensor.arange(3, device=d), lambda d: Tensor.linspace(0, 1, 3, device=d),
    lambda d: Tensor.eye(2, device=d), lambda d: Tensor.rand(2, device=d), lambda d: Tensor.randn(2, device=d),
    lambda d: Tensor.randint(2, device=d), lambda d: Tensor.uniform(2, device=d), lambda d: Tensor.normal(2, device=d),
    lambda d: Tensor.kaiming_uniform(2, 2, device=d), lambda d: Tensor.glorot_uniform(2, 2, device=d),
    lambda d: Tensor([1.0]).full_like(2, device=d), lambda d: Tensor([1.0]).zeros_like(device=d),
])
def test_every_creation_method_takes_a_device(make):
    assert make("cpu").device == "CPU"
    with pytest.raises(RuntimeError, match="device 'tpu' is not available"):
        make("tpu")


def test_results_live_on_their_operands_device():
    x = Tensor([[1.0, -2.0], [3.0, 4.0]])
    for y in (x + 1, x.exp(), x.sum(0), x.T.contiguous(), x @ x, x[[0, 1]], x.pad(((1, 0), (0, 0))),
              x.cast(dtypes.int32)):
        assert y.device == x.device == "CPU"
    assert x.to("cpu") is x


def test_realize_takes_other_tensors():
    a, b = Tensor([1.0]), Tensor([2.0])
    assert a.realize() is a and a.realize(b) is a and Tensor.realize(a, b, a) is a
    with pytest.raises(TypeError, match="realize: expected tensors, got list"):
        a.realize([b])


@pytest.mark.skipif(bool(os.environ.get("SITP_SANITIZE")), reason="under ASan a block is exactly its size")
def test_a_buffer_starts_on_a_cache_line_and_round_trips():
    assert ALIGN == 64
    for n in (1, 3, 100, 4097, 100_000, 393_216):
        for _ in range(2):  # the second time from the pool of freed blocks
            a = np.arange(n, dtype=np.float32)
            buf = Buffer.from_numpy(a)
            assert buf.address % 64 == 0
            assert np.array_equal(buf.to_numpy(0, n, dtypes.float32), a)
            del buf
