"""nn layers against torch (forward and gradients from the same weights), their shapes and inits,
and nn.state: names, tied parameters, load_state_dict's checks, and the safetensors round trip."""

import json
import struct

import numpy as np
import pytest

from .. import Tensor, dtypes, nn
from ..nn.state import (
    get_parameters,
    get_state_dict,
    load_state_dict,
    safe_load,
    safe_load_metadata,
    safe_save,
)

torch = pytest.importorskip("torch", reason="nn layers are checked against torch (pip install -e '.[torch]')")


def t(x: Tensor):
    return torch.tensor(x.numpy(), requires_grad=x.requires_grad and x.dtype.is_float)


def check_layer(ours, theirs, x: np.ndarray, names: list[str], rtol=1e-5, atol=1e-5):
    """Same weights in both, same input; outputs and every parameter's gradient must agree."""
    with torch.no_grad():
        for name in names:
            getattr(theirs, name).copy_(torch.from_numpy(getattr(ours, name).numpy()))
    xo = Tensor(x, requires_grad=x.dtype.kind == "f")
    xt = torch.tensor(x, requires_grad=x.dtype.kind == "f")
    out, out_t = ours(xo), theirs(xt)
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=rtol, atol=atol)
    w = np.random.default_rng(0).standard_normal(out.shape).astype(np.float32)
    (out * Tensor(w)).sum().backward()
    (out_t * torch.from_numpy(w)).sum().backward()
    for name in names:
        np.testing.assert_allclose(getattr(ours, name).grad.numpy(), getattr(theirs, name).grad.numpy(),
                                   rtol=rtol, atol=atol, err_msg=name)
    if xt.requires_grad:
        np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=rtol, atol=atol, err_msg="input")


def randn(*shape):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def test_linear():
    Tensor.manual_seed(0)
    lin = nn.Linear(6, 4)
    assert lin.weight.shape == (4, 6) and lin.bias.shape == (4,)
    assert np.abs(lin.weight.numpy()).max() <= 1 / np.sqrt(6)
    check_layer(lin, torch.nn.Linear(6, 4), randn(3, 5, 6), ["weight", "bias"])
    assert nn.Linear(6, 4, bias=False).bias is None


def test_embedding_gathers_rows_and_scatters_gradients():
    emb = nn.Embedding(7, 5)
    idx = np.array([[0, 3, 3], [6, 0, 3]])
    check_layer(emb, torch.nn.Embedding(7, 5), idx, ["weight"])
    with pytest.raises(TypeError, match="int"):
        emb(Tensor([0.0, 1.0]))


def test_layernorm_and_rmsnorm():
    check_layer(nn.LayerNorm(8), torch.nn.LayerNorm(8), randn(2, 3, 8), ["weight", "bias"])
    check_layer(nn.LayerNorm((3, 8)), torch.nn.LayerNorm((3, 8)), randn(2, 3, 8), ["weight", "bias"])
    assert nn.LayerNorm(8, bias=False).bias is None
    check_layer(nn.RMSNorm(8), torch.nn.RMSNorm(8, eps=1e-6), randn(4, 8), ["weight"])


def test_conv2d():
    conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
    assert conv.weight.shape == (6, 2, 3, 3)
    check_layer(conv, torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), randn(2, 4, 9, 9),
                ["weight", "bias"], rtol=1e-4)


def test_batchnorm_training_and_eval():
    ours, theirs = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    x = randn(4, 3, 5, 5) * 2 + 1
    with Tensor.train():
        check_layer(ours, theirs.train(), x, ["weight", "bias"], rtol=1e-4)
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5, atol=1e-6)
    assert ours.num_batches_tracked.item() == 1
    out = ours(Tensor(x))  # eval: running statistics
    np.testing.assert_allclose(out.numpy(), theirs.eval()(torch.from_numpy(x)).detach().numpy(), rtol=1e-4,
                               atol=1e-5)


def test_dropout_layer_is_identity_in_eval():
    x = Tensor(randn(3, 4))
    assert np.array_equal(nn.Dropout(0.5)(x).numpy(), x.numpy())


class Block:
    def __init__(self):
        self.ln = nn.LayerNorm(4)
        self.fc = nn.Linear(4, 4)


class Model:
    def __init__(self):
        self.wte = nn.Embedding(10, 4)
        self.blocks = [Block(), Block()]
        self.extra = {"norm": nn.BatchNorm(4)}
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.wte.weight  # tied


def test_state_dict_names_order_and_tied_parameters():
    m = Model()
    names = list(get_state_dict(m))
    assert names == ["wte.weight", "blocks.0.ln.weight", "blocks.0.ln.bias", "blocks.0.fc.weight", "blocks.0.fc.bias",
                     "blocks.1.ln.weight", "blocks.1.ln.bias", "blocks.1.fc.weight", "blocks.1.fc.bias",
                     "extra.norm.weight", "extra.norm.bias", "extra.norm.running_mean", "extra.norm.running_var",
                     "extra.norm.num_batches_tracked", "head.weight"]
    params = get_parameters(m)
    assert len(params) == 11  # no running stats, the tied weight once
    assert sum(p is m.wte.weight for p in params) == 1
    m.extra["plain"] = Tensor.zeros(2)  # requires_grad None: trainable, as in tinygrad
    m.blocks[0].ln.weight.requires_grad_(False)  # frozen
    params = get_parameters(m)
    assert len(params) == 11 and params[-1] is m.extra["plain"]


def test_load_state_dict_copies_in_place_and_checks():
    a, b = Model(), Model()
    before = b.blocks[0].fc.weight
    load_state_dict(b, get_state_dict(a))
    assert b.blocks[0].fc.weight is before
    assert np.array_equal(before.numpy(), a.blocks[0].fc.weight.numpy())
    sd = get_state_dict(a)
    with pytest.raises(ValueError, match="blocks.0.fc.weight"):
        load_state_dict(b, {**sd, "blocks.0.fc.weight": Tensor.zeros(3, 4)})
    with pytest.raises(ValueError, match="wte.weight"):
        load_state_dict(b, {**sd, "wte.weight": Tensor.zeros(10, 4, dtype=dtypes.float64)})
    with pytest.raises(ValueError, match="missing"):
        load_state_dict(b, {k: v for k, v in sd.items() if k != "head.weight"})
    load_state_dict(b, {k: v for k, v in sd.items() if k != "extra.norm.running_var"}, strict=False)


def test_safetensors_round_trip_every_dtype(tmp_path):
    sd = {"f32": Tensor(randn(3, 4)), "f64": Tensor(np.arange(5.0)), "i32": Tensor([1, -2], dtype=dtypes.int32),
          "i64": Tensor([[7]]), "b": Tensor([True, False]), "scalar": Tensor(2.5), "empty": Tensor.zeros(0, 3),
          "view": Tensor(randn(4, 3)).T}
    path = tmp_path / "x.safetensors"
    safe_save(sd, path, metadata={"step": "12"})
    back = safe_load(path)
    assert list(back) == list(sd)
    for k, v in sd.items():
        assert back[k].dtype is v.dtype and back[k].shape == v.shape
        assert np.array_equal(back[k].numpy(), v.numpy())
    assert safe_load_metadata(path) == {"step": "12"}
    assert [p.name for p in tmp_path.iterdir()] == ["x.safetensors"]  # no temp file left behind


def test_safetensors_layout_is_the_published_format(tmp_path):
    path = tmp_path / "x.safetensors"
    safe_save({"a": Tensor([1.0, 2.0]), "b": Tensor([3], dtype=dtypes.int32)}, path)
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert (8 + n) % 8 == 0
    assert header["a"] == {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    assert header["b"] == {"dtype": "I32", "shape": [1], "data_offsets": [8, 12]}
    assert np.array_equal(np.frombuffer(raw[8 + n:8 + n + 8], "<f4"), [1.0, 2.0])


def test_safetensors_rejects_broken_files(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"\x00\x01")
    with pytest.raises(ValueError, match="too short"):
        safe_load(path)
    path.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(ValueError, match="past the end"):
        safe_load(path)
    header = json.dumps({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\x00" * 8)
    with pytest.raises(ValueError, match="byte range"):
        safe_load(path)
    header = json.dumps({"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\x00" * 2)
    with pytest.raises(ValueError, match="dtype"):
        safe_load(path)


def test_a_transformer_block_has_torchs_gradients():
    """Embedding, LayerNorm, fused qkv, causal attention, GELU MLP, tied head, cross-entropy: every
    parameter's gradient against torch, in float64, from the same weights and batch."""
    B, T, C, H, V = 2, 5, 8, 2, 11

    def model(F, wte, wpe, ln_w, ln_b, w_qkv, w_proj, w_fc, w_out, idx, y, ops):
        x = ops["emb"](wte, idx) + wpe
        h = ops["ln"](x, ln_w, ln_b)
        q, k, v = ops["split"](h @ w_qkv, C)
        q, k, v = (ops["heads"](t) for t in (q, k, v))
        a = ops["attn"](q, k, v)
        x = x + ops["merge"](a) @ w_proj
        x = x + ops["gelu"](x @ w_fc) @ w_out
        return ops["ce"](x @ wte.transpose(0, 1), y)

    rng = np.random.default_rng(0)
    shapes = [(V, C), (T, C), (C,), (C,), (C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)]
    values = [rng.standard_normal(s) * 0.3 for s in shapes]
    idx, y = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))

    ours_params = [Tensor(v, requires_grad=True) for v in values]
    ours = {"emb": lambda w, i: w[i], "ln": lambda x, w, b: x.layernorm() * w + b,
            "split": lambda t, n: t.split(n, dim=-1),
            "heads": lambda t: t.reshape(B, T, H, C // H).transpose(1, 2),
            "attn": lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
            "merge": lambda a: a.transpose(1, 2).reshape(B, T, C), "gelu": lambda t: t.gelu(),
            "ce": lambda logits, y: logits.reshape(B * T, V).cross_entropy(y.reshape(B * T))}
    loss = model(None, *ours_params, Tensor(idx), Tensor(y), ours)
    loss.backward()

    F = torch.nn.functional
    theirs_params = [torch.tensor(v, requires_grad=True) for v in values]
    theirs = {"emb": lambda w, i: w[i], "ln": lambda x, w, b: F.layer_norm(x, (C,), w, b),
              "split": lambda t, n: t.split(n, dim=-1),
              "heads": lambda t: t.reshape(B, T, H, C // H).transpose(1, 2),
              "attn": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
              "merge": lambda a: a.transpose(1, 2).reshape(B, T, C), "gelu": F.gelu,
              "ce": lambda logits, y: F.cross_entropy(logits.reshape(B * T, V), y.reshape(B * T))}
    loss_t = model(F, *theirs_params, torch.from_numpy(idx), torch.from_numpy(y), theirs)
    loss_t.backward()
    assert loss.item() == pytest.approx(loss_t.item(), rel=1e-12)
    for i, (p, pt) in enumerate(zip(ours_params, theirs_params, strict=True)):
        np.testing.assert_allclose(p.grad.numpy(), pt.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=f"param {i}")
