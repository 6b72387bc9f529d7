"""csrc/memory.c: memory a step frees stays in the process for the next step."""

import os
import platform
import resource

import pytest

from .. import Tensor

PAGES = 20 * (2 << 20) // resource.getpagesize()  # one round: twenty 2 MiB tensors


def _round() -> None:
    tensors = [Tensor.zeros(1 << 19) for _ in range(20)]  # zeros writes every page
    del tensors


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="keep_freed_memory tunes glibc's malloc only")
@pytest.mark.skipif(os.environ.get("SITP_SANITIZE") == "address", reason="ASan's malloc ignores mallopt")
def test_freed_tensors_are_not_faulted_in_again():
    # glibc by default would trim the 40 MiB freed at the top of the heap after each round and
    # fault every page in afresh in the next one: about PAGES faults per round.
    _round()
    _round()
    before = _faults()
    for _ in range(5):
        _round()
    assert _faults() - before < PAGES // 2, f"{(_faults() - before) / 5:.0f} page faults per round of {PAGES} pages"
