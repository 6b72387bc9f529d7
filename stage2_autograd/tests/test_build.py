"""The C kernels build by themselves, are cached by a hash of the sources, and rebuild on change."""

import shutil

from .. import ckernels


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
