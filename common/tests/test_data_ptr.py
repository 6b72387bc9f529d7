"""Tensor.data_ptr() on every stage: the address of the first element, which a library that reads the
memory itself (NCCL, common/train/collectives.py) is given; a tensor whose elements do not lie there in
order is refused."""

from __future__ import annotations

import ctypes
import importlib

import numpy as np
import pytest

from common.stages import STAGES


@pytest.mark.parametrize("name", sorted(STAGES.values()))
def test_data_ptr_addresses_the_first_element(name):
    T = importlib.import_module(name).Tensor
    x = T(np.arange(12, dtype=np.float32)).reshape(3, 4)
    cases = [(x, np.arange(12)), (x[1:].contiguous(), np.arange(4, 12)), ((x + 1).contiguous(), np.arange(1, 13)),
             (x.permute(1, 0).contiguous(), np.arange(12).reshape(3, 4).T.ravel())]
    for t, want in cases:
        seen = np.frombuffer((ctypes.c_float * t.numel()).from_address(t.data_ptr()), np.float32)
        np.testing.assert_array_equal(seen, want.astype(np.float32))


@pytest.mark.parametrize("name", sorted(STAGES.values()))
def test_data_ptr_refuses_a_strided_view(name):
    T = importlib.import_module(name).Tensor
    x = T(np.arange(12, dtype=np.float32)).reshape(3, 4)
    with pytest.raises(ValueError, match=r"data_ptr.*\(4, 3\)"):
        x.permute(1, 0).data_ptr()
