"""Every layer of `nn` against its torch counterpart, on every stage with `nn` (stage2 on).

Each case builds torch's layer, loads its state dict into ours by name (so the attribute names
and shapes are torch's: a torch checkpoint loads as it is), then runs one training-mode forward
on the same input, contracts every output with a fixed random cotangent and runs backward; the
outputs, the input's gradient and every parameter's gradient must agree, and so must the running
statistics the step updated and a forward in evaluation mode after it.

The reference runs in float64 (torch's layer cast with .double()), ours in float32, so the
tolerance measures our rounding alone: (1e-5, 2e-5). Why: each value is a sum of at most a few
hundred float32 products of numbers of size <= 4 (a convolution's taps times channels, a norm's
mean over a channel, a weight gradient over batch and pixels), whose rounding error is about
sqrt(n) * 6e-8 * |partial sums| ~ 1e-6 to 1e-5 absolute; a normalisation divides by a standard
deviation of about 1, which keeps it there.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="layers are checked against torch.nn (pip install -e '.[torch]')")

RTOL, ATOL = 1e-5, 2e-5


class TorchLayerNorm2d(torch.nn.LayerNorm):
    """torch has no LayerNorm2d: its LayerNorm over the channels of a permuted image is the reference."""

    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


@dataclass(frozen=True)
class LayerCase:
    name: str
    ours: Callable[[Any], Any]  # the stage's nn -> our layer
    theirs: Callable[[], Any]  # -> torch's layer
    shape: tuple[int, ...]  # the input's

    def __str__(self) -> str:
        return self.name


def _case(name, ours, theirs, shape):
    return LayerCase(name, ours, theirs, shape)


CASES = [
    _case("conv1d_strided", lambda nn: nn.Conv1d(3, 4, 3, stride=2, padding=1),
          lambda: torch.nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
    _case("conv1d_same_even_kernel", lambda nn: nn.Conv1d(3, 4, 4, padding="same"),
          lambda: torch.nn.Conv1d(3, 4, 4, padding="same"), (2, 3, 7)),
    _case("conv1d_same_dilated", lambda nn: nn.Conv1d(2, 3, 3, padding="same", dilation=2, bias=False),
          lambda: torch.nn.Conv1d(2, 3, 3, padding="same", dilation=2, bias=False), (1, 2, 8)),
    _case("conv2d_same_groups", lambda nn: nn.Conv2d(4, 6, (3, 2), padding="same", groups=2),
          lambda: torch.nn.Conv2d(4, 6, (3, 2), padding="same", groups=2), (2, 4, 5, 6)),
    _case("conv2d_valid", lambda nn: nn.Conv2d(3, 4, 3, padding="valid", stride=(2, 1)),
          lambda: torch.nn.Conv2d(3, 4, 3, padding="valid", stride=(2, 1)), (2, 3, 7, 6)),
    _case("conv2d_reflect", lambda nn: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
          lambda: torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), (2, 3, 5, 5)),
    _case("conv2d_circular", lambda nn: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="circular"),
          lambda: torch.nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="circular"), (1, 2, 5, 6)),
    _case("conv2d_unbatched", lambda nn: nn.Conv2d(3, 2, 2), lambda: torch.nn.Conv2d(3, 2, 2), (3, 4, 4)),
    _case("conv3d", lambda nn: nn.Conv3d(2, 3, 2, stride=(1, 2, 1), padding=(1, 0, 1)),
          lambda: torch.nn.Conv3d(2, 3, 2, stride=(1, 2, 1), padding=(1, 0, 1)), (1, 2, 4, 5, 4)),
    _case("conv_transpose1d", lambda nn: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1),
          lambda: torch.nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1), (2, 3, 5)),
    _case("conv_transpose2d_groups",
          lambda nn: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
          lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), (2, 4, 3, 4)),
    _case("conv_transpose2d_dilated",
          lambda nn: nn.ConvTranspose2d(3, 2, (2, 3), stride=(2, 1), dilation=2, output_padding=(1, 0)),
          lambda: torch.nn.ConvTranspose2d(3, 2, (2, 3), stride=(2, 1), dilation=2, output_padding=(1, 0)),
          (2, 3, 3, 4)),
    _case("conv_transpose2d_same", lambda nn: nn.ConvTranspose2d(2, 3, 4, padding="same"),
          lambda: _transpose_same(2, 3, 4), (1, 2, 5, 5)),
    _case("conv_transpose3d", lambda nn: nn.ConvTranspose3d(2, 2, 2, stride=2, bias=False),
          lambda: torch.nn.ConvTranspose3d(2, 2, 2, stride=2, bias=False), (1, 2, 2, 3, 2)),
    _case("batchnorm1d", lambda nn: nn.BatchNorm1d(4), lambda: torch.nn.BatchNorm1d(4), (6, 4)),
    _case("batchnorm1d_sequence", lambda nn: nn.BatchNorm(sz=4, momentum=None),
          lambda: torch.nn.BatchNorm1d(4, momentum=None), (3, 4, 5)),
    _case("batchnorm2d", lambda nn: nn.BatchNorm2d(3, eps=1e-3, momentum=0.3),
          lambda: torch.nn.BatchNorm2d(3, eps=1e-3, momentum=0.3), (2, 3, 4, 4)),
    _case("batchnorm3d_no_affine", lambda nn: nn.BatchNorm3d(2, affine=False),
          lambda: torch.nn.BatchNorm3d(2, affine=False), (2, 2, 2, 3, 2)),
    _case("groupnorm", lambda nn: nn.GroupNorm(2, 6), lambda: torch.nn.GroupNorm(2, 6), (2, 6, 3, 3)),
    _case("groupnorm_1d_no_affine", lambda nn: nn.GroupNorm(3, 3, eps=1e-3, affine=False),
          lambda: torch.nn.GroupNorm(3, 3, eps=1e-3, affine=False), (4, 3, 5)),
    _case("instancenorm1d", lambda nn: nn.InstanceNorm1d(3), lambda: torch.nn.InstanceNorm1d(3), (2, 3, 6)),
    _case("instancenorm2d_affine_running",
          lambda nn: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
          lambda: torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True), (2, 3, 4, 5)),
    _case("instancenorm_tinygrad", lambda nn: nn.InstanceNorm(3),
          lambda: torch.nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 4)),
    _case("instancenorm3d_unbatched", lambda nn: nn.InstanceNorm3d(2), lambda: torch.nn.InstanceNorm3d(2),
          (2, 3, 2, 3)),
    _case("layernorm", lambda nn: nn.LayerNorm((3, 4)), lambda: torch.nn.LayerNorm((3, 4)), (2, 3, 4)),
    _case("layernorm2d", lambda nn: nn.LayerNorm2d(3), lambda: TorchLayerNorm2d(3), (2, 3, 4, 5)),
    _case("lstm_cell", lambda nn: nn.LSTMCell(5, 4), lambda: torch.nn.LSTMCell(5, 4), (3, 5)),
    _case("lstm_cell_unbatched", lambda nn: nn.LSTMCell(5, 4, bias=False),
          lambda: torch.nn.LSTMCell(5, 4, bias=False), (5,)),
    _case("gru_cell", lambda nn: nn.GRUCell(5, 4), lambda: torch.nn.GRUCell(5, 4), (3, 5)),
    _case("lstm_two_layers", lambda nn: nn.LSTM(5, 4, num_layers=2), lambda: torch.nn.LSTM(5, 4, num_layers=2),
          (3, 2, 5)),
    _case("lstm_batch_first", lambda nn: nn.LSTM(3, 4, batch_first=True),
          lambda: torch.nn.LSTM(3, 4, batch_first=True), (2, 4, 3)),
    _case("gru_two_layers", lambda nn: nn.GRU(5, 4, num_layers=2), lambda: torch.nn.GRU(5, 4, num_layers=2),
          (3, 2, 5)),
    _case("gru_batch_first_no_bias", lambda nn: nn.GRU(3, 4, bias=False, batch_first=True),
          lambda: torch.nn.GRU(3, 4, bias=False, batch_first=True), (2, 4, 3)),
]


def _transpose_same(cin, cout, k):
    """torch's ConvTranspose has no padding="same". Ours is the adjoint of Conv's "same" (padding
    (k - 1) // 2 before and the rest after, cropped from the full output): torch's symmetric padding
    (k - 1) // 2, with the one extra row and column cropped from the end when k - 1 is odd."""

    class Same(torch.nn.ConvTranspose2d):
        def forward(self, x):
            out = super().forward(x)
            return out[..., :-1, :-1] if (k - 1) % 2 else out

    return Same(cin, cout, k, padding=(k - 1) // 2)


def _tensors(out) -> list:
    """A layer's outputs as a flat list: LSTM gives (out, (h, c)), LSTMCell (h, c)."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return [out]


def _run_torch(layer, x: np.ndarray, cotangents: list[np.ndarray] | None):
    x = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    layer.train()
    outs = _tensors(layer(x))
    if cotangents is None:
        return outs
    sum((o * torch.from_numpy(w)).sum() for o, w in zip(outs, cotangents, strict=True)).backward()
    layer.eval()
    with torch.no_grad():
        after = _tensors(layer(x))
    return outs, x.grad, after


@pytest.mark.needs("train")
@pytest.mark.parametrize("case", CASES, ids=str)
def test_layer_matches_torch(stage, case):
    T, nn = stage.module.Tensor, stage.module.nn
    torch.manual_seed(0)
    theirs = case.theirs()
    ours = case.ours(nn)
    nn.state.load_state_dict(ours, {k: T(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    theirs = theirs.double()

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(case.shape).astype(np.float32)
    # the cotangents' shapes from a forward on a copy, so the running statistics step once
    cotangents = [rng.standard_normal(tuple(o.shape)) for o in _run_torch(copy.deepcopy(theirs), x_np, None)]
    t_outs, t_xgrad, t_after = _run_torch(theirs, x_np, cotangents)

    x = T(x_np, requires_grad=True)
    with T.train():
        outs = _tensors(ours(x))
        sum(((o * T(w.astype(np.float32))).sum() for o, w in zip(outs, cotangents, strict=True)), T(0.0)).backward()
    for i, (o, t) in enumerate(zip(outs, t_outs, strict=True)):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), RTOL, ATOL, err_msg=f"{case}: output {i}")
    np.testing.assert_allclose(x.grad.numpy(), t_xgrad.numpy(), RTOL, ATOL, err_msg=f"{case}: input gradient")
    own = nn.state.get_state_dict(ours)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(own[name].grad.numpy(), p.grad.numpy(), RTOL, ATOL, err_msg=f"{case}: {name}.grad")
    for name, b in theirs.named_buffers():  # running statistics after one training step
        np.testing.assert_allclose(own[name].numpy(), b.numpy(), RTOL, ATOL, err_msg=f"{case}: buffer {name}")
    after = _tensors(ours(T(x_np)))  # evaluation mode: the running statistics, where there are any
    for i, (o, t) in enumerate(zip(after, t_after, strict=True)):
        np.testing.assert_allclose(o.numpy(), t.numpy(), RTOL, ATOL, err_msg=f"{case}: eval output {i}")



BAD_LAYERS = [  # (constructor, what the message must say): refused where the layer is built
    (lambda nn: nn.Conv2d(3, 4, 3, padding="full"), r"Conv2d: padding string must be 'valid' or 'same'"),
    (lambda nn: nn.Conv1d(3, 4, 3, stride=2, padding="same"), r"Conv1d: padding='same' needs stride 1"),
    (lambda nn: nn.Conv2d(3, 4, 3, groups=2), r"Conv2d: in_channels 3 .* must divide by groups 2"),
    (lambda nn: nn.Conv2d(3, 4, (3, 3, 3)), r"Conv2d: kernel_size must be an int or 2 ints"),
    (lambda nn: nn.Conv2d(3, 4, 3, padding=(1, 2, 3)), r"Conv2d: padding must be .* 2 ints or 4 ints"),
    (lambda nn: nn.Conv2d(3, 4, 3, padding_mode="wrap"), r"Conv2d: padding_mode must be one of"),
    (lambda nn: nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=2), r"output_padding \(2, 2\) must be smaller"),
    (lambda nn: nn.ConvTranspose1d(3, 4, 3, padding_mode="reflect"), r"ConvTranspose1d: padding_mode must be one"),
    (lambda nn: nn.GroupNorm(4, 6), r"GroupNorm: num_channels 6 must divide by num_groups 4"),
    (lambda nn: nn.LSTM(3, 4, bidirectional=True), r"LSTM: bidirectional .* not supported"),
    (lambda nn: nn.GRU(3, 4, proj_size=2), r"GRU: bidirectional .* proj_size \(2\) are not supported"),
]


@pytest.mark.needs("train")
@pytest.mark.parametrize("index", range(len(BAD_LAYERS)))
def test_a_bad_layer_is_refused_where_it_is_built(stage, index):
    make, message = BAD_LAYERS[index]
    with pytest.raises(ValueError, match=message) as caught:
        make(stage.module.nn)
    assert isinstance(caught.value, RuntimeError)  # the ArgumentError of docs/api-contract.md's Errors


@pytest.mark.needs("train")
def test_batchnorm_takes_tinygrads_sz_or_torchs_num_features_once(stage):
    nn = stage.module.nn
    assert nn.BatchNorm(sz=3).num_features == nn.BatchNorm(3).num_features == 3
    with pytest.raises(TypeError, match="num_features .* or sz"):
        nn.BatchNorm(3, sz=3)


@pytest.mark.needs("train")
def test_a_layer_called_on_the_wrong_input_names_it(stage):
    T, nn = stage.module.Tensor, stage.module.nn
    with pytest.raises(ValueError, match=r"Conv2d: expected an input \(\[N,\] 3, 2 spatial dims\), got \(2, 4, 5, 5\)"):
        nn.Conv2d(3, 4, 3)(T.zeros(2, 4, 5, 5))
    with pytest.raises(ValueError, match=r"LSTMCell: expected an input \(\[batch,\] 5\), got \(2, 4\)"):
        nn.LSTMCell(5, 3)(T.zeros(2, 4))
