"""Movement ops are views over the same Buffer where strides allow, and copy only when they must."""

import numpy as np

from .. import Tensor


def shares(a: Tensor, b: Tensor) -> bool:
    return a._buf is b._buf


def test_views_share_memory():
    x = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for view in (x.reshape(6, 4), x.permute(2, 0, 1), x.T, x[1], x[:, ::2, ::-1], x.flip(0), x.unsqueeze(1),
                 x[None, ..., 1], x.expand(5, 2, 3, 4), x.shrink(((0, 1), None, (1, 3))), x.flatten(1)):
        assert shares(view, x)


def test_expand_uses_zero_strides():
    x = Tensor([[1.0], [2.0]]).expand(2, 1000)
    assert x._strides == (1, 0)
    assert x.sum().item() == 3000


def test_reshape_copies_only_when_it_must():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert shares(x.T.reshape(4, 3, 1), x)
    flat = x.T.reshape(12)  # a transposed layout cannot be flattened in place
    assert not shares(flat, x)
    np.testing.assert_array_equal(flat.numpy(), np.arange(12).reshape(3, 4).T.reshape(12))


def test_copies_do_not_alias():
    x = Tensor(np.arange(6, dtype=np.float32))
    for copy in (x[[0, 1]], x.pad(((1, 1),)), x.cat(x), x.clone()):
        assert not shares(copy, x)


def test_contiguous_of_a_contiguous_tensor_is_itself():
    x = Tensor(np.zeros((2, 3), np.float32))
    assert x.contiguous() is x
    assert not x.T._is_contiguous()
