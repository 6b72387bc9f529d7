"""The C kernels build by themselves, are cached by a hash of the sources, and rebuild on change."""

import os
import shutil
import subprocess
import sys

import pytest

from .. import ckernels, isa


def test_kernels_load_from_the_cache():
    flags = ckernels._flags()
    key = ckernels._fingerprint(sorted(ckernels.CSRC.glob("*.c")), flags)
    built = list(ckernels._cache_dir().glob(f"{ckernels.MODULE}-{key}*"))
    assert len(built) == 1


def test_fingerprint_changes_when_a_source_changes(tmp_path, monkeypatch):
    copy = tmp_path / "csrc"
    shutil.copytree(ckernels.CSRC, copy)
    monkeypatch.setattr(ckernels, "CSRC", copy)
    flags = ckernels._flags()
    before = ckernels._fingerprint([], flags)
    (copy / "gemm.c").write_text((copy / "gemm.c").read_text() + "\n/* edited */\n")
    assert ckernels._fingerprint([], flags) != before


def test_fingerprint_changes_with_flags():
    assert ckernels._fingerprint([], ["-O3"]) != ckernels._fingerprint([], ["-O1"])


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SITP_CACHE", str(tmp_path))
    assert ckernels._cache_dir() == tmp_path / "kernels"


def test_a_lower_instruction_set_is_another_build(monkeypatch):
    native = ckernels._flags()
    monkeypatch.setenv("SITP_ISA", "generic")
    assert ckernels._fingerprint([], ckernels._flags()) != ckernels._fingerprint([], native)


def test_an_instruction_set_is_named_or_refused(monkeypatch):
    monkeypatch.setenv("SITP_ISA", "avx3")
    with pytest.raises(ValueError, match="SITP_ISA must be one of native, avx512, avx2, generic, got 'avx3'"):
        ckernels._flags()
    monkeypatch.setattr(isa, "cpu_flags", lambda: {"sse2", "avx"})  # a CPU without AVX2
    monkeypatch.setenv("SITP_ISA", "avx2")
    with pytest.raises(RuntimeError, match="SITP_ISA=avx2: this CPU cannot run x86-64-v3 code .*avx2"):
        ckernels._flags()
    assert isa.lower_than_native() == [isa.ISA.GENERIC]


def test_every_instruction_set_this_cpu_runs_computes_the_product():
    # stage1's ladder picks its rung's path by the build (#ifdef __AVX512F__, __AVX2__, else plain C): each
    # build this CPU can run, in a process of its own, against float64 numpy
    script = ("import numpy as np; from PACKAGE import Tensor\n"
              "a = np.random.default_rng(0).standard_normal((67, 45)).astype(np.float32)\n"
              "print(abs((Tensor(a) @ Tensor(a.T)).numpy() - a.astype(np.float64) @ a.T).max())")
    for choice in [isa.ISA.NATIVE, *isa.lower_than_native()]:
        env = {**os.environ, "SITP_ISA": choice.value}
        done = subprocess.run([sys.executable, "-c", script.replace("PACKAGE", __package__.split(".")[0])],
                              env=env, capture_output=True, text=True, check=True)
        assert float(done.stdout) < 1e-4, choice
