"""Seeing inside and errors (debug.py): bases remember the user's line that made them, NANCHECK=1
stops at the first kernel that wrote a NaN and names it, GRAPH=1 writes the lazy and kernel graphs,
a kernel that does not compile is reported with its UOps and the user's line, and SITP_SANITIZE
builds kernels with AddressSanitizer (checked in a child process with libasan preloaded)."""

import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .. import GlobalCounters, Tensor
from ..cpu import compiler as runtime
from ..engine import debug
from ..viz import graphviz

HERE = Path(__file__).resolve()


def here() -> int:
    """The line of the caller (so a test can say which line made a tensor)."""
    return sys._getframe(1).f_lineno


def tensor(values) -> Tensor:
    return Tensor(np.asarray(values, dtype=np.float32))


# ---- call sites ----

def test_a_base_remembers_the_line_that_made_it():
    x = tensor([1.0, 2.0])
    y, line = x * 3 + 1, here()
    site = y.lazydata.base.site
    assert (Path(site[0]).resolve(), site[1]) == (HERE, line)


def test_a_composite_is_placed_at_the_users_line_not_inside_the_package():
    x = tensor([[1.0, 2.0, 3.0]])
    y, line = x.softmax(-1), here()  # softmax is written in functional.py, several frames down
    sites = set()
    stack = [y.lazydata]
    while stack:
        b = stack.pop().base
        if b.op.name != "BUFFER":
            sites.add((Path(b.site[0]).resolve(), b.site[1]))
        stack.extend(b.srcs)
    assert sites == {(HERE, line)}


# ---- NANCHECK ----

def test_nancheck_names_the_kernel_its_ops_and_the_line(monkeypatch):
    monkeypatch.setenv("NANCHECK", "1")
    x = tensor([1.0, -1.0, 4.0])
    y, line = (x * 2).log(), here()
    with pytest.raises(FloatingPointError) as info:
        y.realize()
    msg = str(info.value)
    assert re.search(r"kernel E_3\w* \(MUL LOG2", msg), msg
    assert "element 1 " in msg  # log(-2) is the NaN; log(2) and log(8) are not
    assert f"test_debug.py:{line}" in msg
    assert "this kernel made it" in msg


def test_nancheck_stops_at_the_first_kernel_and_says_it_was_fed_nan(monkeypatch):
    x = tensor([0.0, 1.0])
    made, line = x / x, here()  # 0/0: the first kernel makes the NaN
    later = (made + 1).sum()
    monkeypatch.setenv("NANCHECK", "1")
    with pytest.raises(FloatingPointError, match=rf"kernel E_2\w* \(DIV\).*test_debug.py:{line}.*made it"):
        later.realize(made)  # one schedule, two kernels: made's, then later's reading it
    assert made.lazydata.realized is not None and later.lazydata.base.buffer is None  # stopped after kernel 1
    made_outside = tensor([np.nan, 1.0])
    with pytest.raises(FloatingPointError, match="read NaN from 1 of its inputs"):
        (made_outside * 2).realize()


def test_nancheck_passes_clean_results_and_ignores_ints(monkeypatch):
    monkeypatch.setenv("NANCHECK", "1")
    x = tensor([1.0, 4.0])
    np.testing.assert_allclose(x.sqrt().numpy(), [1.0, 2.0])
    assert (Tensor(np.array([3, 4])) * 2).numpy().tolist() == [6, 8]


def test_without_nancheck_a_nan_goes_through(monkeypatch):
    monkeypatch.delenv("NANCHECK", raising=False)
    assert np.isnan(tensor([-1.0]).sqrt().numpy()).all()


def test_first_nan_finds_the_first_one_in_float32_and_float64():
    for dtype in (np.float32, np.float64):
        t = Tensor(np.array([1.0, 2.0, np.nan, 3.0, np.nan], dtype=dtype)).realize()
        assert debug.first_nan(t.lazydata.base) == 2
        assert debug.first_nan(Tensor(np.ones(7, dtype=dtype)).realize().lazydata.base) == -1


# ---- GRAPH ----

def test_graph_writes_the_lazy_and_the_kernel_graph(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GRAPH", "1")
    monkeypatch.setenv("GRAPH_DIR", str(tmp_path))
    monkeypatch.setattr(graphviz, "_graph_dir", None)
    x, w = tensor(np.ones((4, 6))), tensor(np.ones((6, 5)))
    out = (x @ w).relu().sum(-1)
    GlobalCounters.reset()
    out.realize()
    kernels = GlobalCounters.kernel_count
    lazy_dot = sorted(tmp_path.glob("*_lazy.dot"))
    kernel_dot = sorted(tmp_path.glob("*_kernels.dot"))
    assert len(lazy_dot) == len(kernel_dot) == 1
    assert str(tmp_path) in capsys.readouterr().out  # it says where
    lazy = lazy_dot[0].read_text()
    assert lazy.startswith("digraph lazy {") and lazy.rstrip().endswith("}")
    assert "REDUCE_ADD" in lazy and "WHERE" in lazy and "view (4, 5, 6)" in lazy
    assert lazy.count("realized") == 2  # x and w were realized before
    assert "(4, 6) float32" in lazy and "test_debug.py:" in lazy
    graph = kernel_dot[0].read_text()
    assert graph.count("shape=box") == kernels >= 2
    assert len(re.findall(r"b\d+ -> k0;", graph)) == 2  # the matmul kernel reads x and w
    assert re.search(r'label="r_4_5\w*\\n[A-Z_ ]*REDUCE_ADD', graph), graph
    if graphviz.shutil.which("dot"):
        assert (tmp_path / lazy_dot[0].with_suffix(".svg").name).exists()


def test_graph_is_off_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("GRAPH", raising=False)
    monkeypatch.setenv("GRAPH_DIR", str(tmp_path))
    monkeypatch.setattr(graphviz, "_graph_dir", None)
    (tensor([1.0]) + 1).realize()
    assert list(tmp_path.iterdir()) == []


# ---- compile errors ----

def test_a_compile_error_names_the_kernel_its_uops_and_the_line(monkeypatch, tmp_path):
    runtime.flags(), runtime.machine_key()  # cached from the real compiler before it is swapped
    refusing = tmp_path / "cc"
    refusing.write_text("#!/bin/sh\necho 'cc: this compiler refuses' >&2\nexit 1\n")
    refusing.chmod(0o755)
    monkeypatch.setenv("CC", str(refusing))
    monkeypatch.setenv("SITP_CACHE", str(tmp_path))  # an empty disk cache: the kernel must compile
    x = tensor(np.ones((13, 17)))
    y, line = (x * 3.25 + 0.75).sqrt(), here()  # constants no other test uses: a kernel not compiled before
    with pytest.raises(runtime.CompileError) as info:
        y.realize()
    msg = str(info.value)
    assert re.search(r"kernel E_13_17\w* \(MUL ADD SQRT\)", msg), msg
    assert f"test_debug.py:{line}" in msg
    assert "UOps:" in msg and re.search(r"v\d+ = STORE\s+float32", msg)  # the IR, as DEBUG=3 prints it
    assert "this compiler refuses" in msg  # and the compiler's own words


# ---- linking ----

LINKED = """float expf(float);
void linked(float *out, long long n) {
  #pragma omp parallel for
  for (long long i = 0; i < n; i++) out[i] = expf((float)i / 8.0f) + (float)((__int128)(i * 1000003) / 7);
}
"""


def test_ld_alone_links_a_kernel_that_computes_what_the_drivers_link_computes(tmp_path):
    """A kernel's object linked by `ld` against libgcc, libm and libgomp (cpu/compiler.direct_link) calls
    all three, and gives the bits of the library gcc's driver links."""
    link = runtime.direct_link()
    gcc = "gcc" in runtime.compiler() + os.path.realpath(shutil.which(runtime.compiler()) or "")
    if sys.platform == "linux" and gcc and not runtime.sanitize_flags():  # (ASan's runtime is the driver's)
        assert link is not None, "gcc on Linux links kernels with ld alone"
    if link is None:
        pytest.skip("this compiler's driver links every kernel")
    outs = []
    for way, name in ((link, "direct.so"), (None, "driver.so")):
        runtime.build_with(way, LINKED, tmp_path / name)
        out = np.zeros(37, np.float32)
        ctypes.CDLL(str(tmp_path / name)).linked(ctypes.c_void_p(out.ctypes.data), ctypes.c_longlong(37))
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    i = np.arange(37)
    np.testing.assert_allclose(outs[0], np.exp(i / 8) + i * 1000003 // 7, rtol=1e-6)  # libm's expf, in float32


# ---- ASan ----

def test_sanitize_flags_key_the_cache(monkeypatch):
    monkeypatch.delenv("SITP_SANITIZE", raising=False)
    assert runtime.sanitize_flags() == []
    monkeypatch.setenv("SITP_SANITIZE", "address")
    assert "-fsanitize=address" in runtime.sanitize_flags()


OVERFLOW = """
from stage3_compiler.buffer import Buffer
from stage3_compiler.cpu.compiler import compile_c
import ctypes
buf = Buffer(4 * 8)
overflow = compile_c("void overflow(float *x) { for (int i = 0; i <= 8; i++) x[i] = 1.0f; }", "overflow")
overflow(ctypes.c_void_p(buf.address))
"""


def libasan() -> str:
    found = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    return found if os.path.isabs(found) else ""


@pytest.mark.skipif(not libasan(), reason="gcc has no libasan here")
def test_asan_catches_a_kernel_writing_past_its_buffer(tmp_path):
    env = dict(os.environ, SITP_SANITIZE="address", LD_PRELOAD=libasan(), ASAN_OPTIONS="detect_leaks=0",
               SITP_CACHE=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", OVERFLOW], env=env, capture_output=True, text=True,
                          cwd=HERE.parents[2])
    assert done.returncode != 0
    assert "heap-buffer-overflow" in done.stderr
