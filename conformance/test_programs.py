"""tinygrad programs with only their import lines changed, trained a few steps against the same programs
written in PyTorch: a small U-Net, an LSTM language model and a GAN, each built from `nn` layers and
stepped by `optim` (stages 2 and 3).

Each program is written twice, as a tinygrad user and as a PyTorch user would write it. The torch
model's state dict is loaded into ours by name (so the layers' names and shapes are torch's), both
train on the same numpy batches, and the losses must agree at every step within test_models.py's
trajectory tolerance (2e-5 relative + 1e-6, float32; its docstring derives it).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the programs are checked against PyTorch (pip install -e '.[torch]')")
F = torch.nn.functional

STEPS, RTOL, ATOL = 5, 2e-5, 1e-6


def load_torch_weights(nn, T, ours, theirs) -> None:
    nn.state.load_state_dict(ours, {k: T(v.detach().numpy()) for k, v in theirs.state_dict().items()})


# ---- a small U-Net: two levels, a skip connection, a transposed convolution up ----

class UNet:  # as a tinygrad user writes it (nn from the stage, in place of tinygrad's)
    def __init__(self, nn):
        self.down = [nn.Conv2d(1, 4, 3, padding="same"), nn.GroupNorm(2, 4)]
        self.mid = [nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8)]
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.out = nn.Conv2d(8, 1, 1)

    def __call__(self, x):
        skip = x.sequential(self.down).relu()
        h = skip.max_pool2d(2).sequential(self.mid).relu()
        return self.out(self.up(h).cat(skip, dim=1))


class TorchUNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.down = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding="same"), torch.nn.GroupNorm(2, 4))
        self.mid = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.BatchNorm2d(8))
        self.up = torch.nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.out = torch.nn.Conv2d(8, 1, 1)

    def forward(self, x):
        skip = self.down(x).relu()
        h = self.mid(F.max_pool2d(skip, 2)).relu()
        return self.out(torch.cat([self.up(h), skip], dim=1))


# ---- an LSTM language model, one LSTMCell stepped over the sequence ----

class CharLSTM:
    def __init__(self, nn, vocab=7, hidden=12):
        self.embed, self.cell, self.head = nn.Embedding(vocab, 6), nn.LSTMCell(6, hidden), nn.Linear(hidden, vocab)

    def __call__(self, idx):
        hc, outs = None, []
        x = self.embed(idx)
        for t in range(idx.shape[1]):
            hc = self.cell(x[:, t], hc)
            outs.append(self.head(hc[0]))
        return outs[0].stack(*outs[1:], dim=1)


class TorchCharLSTM(torch.nn.Module):
    def __init__(self, vocab=7, hidden=12):
        super().__init__()
        self.embed, self.cell = torch.nn.Embedding(vocab, 6), torch.nn.LSTMCell(6, hidden)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, idx):
        hc, outs = None, []
        x = self.embed(idx)
        for t in range(idx.shape[1]):
            hc = self.cell(x[:, t], hc)
            outs.append(self.head(hc[0]))
        return torch.stack(outs, dim=1)


# ---- a GAN: a generator and a discriminator, each with its own Adam ----

class Generator:
    def __init__(self, nn):
        self.layers = [nn.Linear(4, 16), nn.BatchNorm(16), lambda t: t.leaky_relu(0.2), nn.Linear(16, 8),
                       lambda t: t.tanh()]

    def __call__(self, z):
        return z.sequential(self.layers)


class Discriminator:
    def __init__(self, nn):
        self.layers = [nn.Linear(8, 16), lambda t: t.leaky_relu(0.2), nn.Linear(16, 1)]

    def __call__(self, x):
        return x.sequential(self.layers)


def torch_generator():
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.BatchNorm1d(16), torch.nn.LeakyReLU(0.2),
                               torch.nn.Linear(16, 8), torch.nn.Tanh())


def torch_discriminator():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LeakyReLU(0.2), torch.nn.Linear(16, 1))


# ---- the runs ----

def _close(ours, theirs, what):
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=what)
    assert ours[-1] < ours[0], f"{what}: the loss did not go down: {ours}"


@pytest.mark.needs("train")
def test_unet_trains_as_in_torch(stage):
    T, nn, optim = stage.module.Tensor, stage.module.nn, stage.module.optim
    rng = np.random.default_rng(0)
    batches = [tuple(rng.standard_normal((4, 1, 8, 8)).astype(np.float32) for _ in range(2)) for _ in range(STEPS)]
    torch.manual_seed(0)
    theirs, ours = TorchUNet(), UNet(nn)
    load_torch_weights(nn, T, ours, theirs)
    opt, opt_t = optim.Adam(nn.state.get_parameters(ours), lr=0.01), torch.optim.Adam(theirs.parameters(), lr=0.01)
    losses, losses_t = [], []
    with T.train():
        for x, y in batches:
            opt.zero_grad()
            loss = (ours(T(x)) - T(y)).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    for x, y in batches:
        opt_t.zero_grad()
        loss = F.mse_loss(theirs(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt_t.step()
        losses_t.append(loss.item())
    _close(losses, losses_t, "U-Net")


@pytest.mark.needs("train")
def test_lstm_language_model_trains_as_in_torch(stage):
    T, nn, optim = stage.module.Tensor, stage.module.nn, stage.module.optim
    rng = np.random.default_rng(1)
    batches = [rng.integers(0, 7, (4, 6)) for _ in range(STEPS)]
    torch.manual_seed(0)
    theirs, ours = TorchCharLSTM(), CharLSTM(nn)
    load_torch_weights(nn, T, ours, theirs)
    opt = optim.AdamW(nn.state.get_parameters(ours), lr=0.02, b1=0.9, b2=0.99)
    opt_t = torch.optim.AdamW(theirs.parameters(), lr=0.02, betas=(0.9, 0.99))
    losses, losses_t = [], []
    for seq in batches:
        opt.zero_grad()
        logits = ours(T(seq[:, :-1]))
        loss = logits.sparse_categorical_crossentropy(T(seq[:, 1:]))
        loss.backward()
        opt.step()
        losses.append(loss.item())
        opt_t.zero_grad()
        logits_t = theirs(torch.from_numpy(seq[:, :-1]))
        loss_t = F.cross_entropy(logits_t.reshape(-1, 7), torch.from_numpy(seq[:, 1:]).reshape(-1))
        loss_t.backward()
        opt_t.step()
        losses_t.append(loss_t.item())
    _close(losses, losses_t, "LSTM language model")


@pytest.mark.needs("train")
def test_gan_trains_as_in_torch(stage):
    T, nn, optim = stage.module.Tensor, stage.module.nn, stage.module.optim
    rng = np.random.default_rng(2)
    data = [(rng.standard_normal((8, 8)).astype(np.float32) * 0.5 + 0.3, rng.standard_normal((8, 4)).astype(np.float32))
            for _ in range(STEPS)]
    torch.manual_seed(0)
    g_t, d_t = torch_generator(), torch_discriminator()
    g, d = Generator(nn), Discriminator(nn)
    load_torch_weights(nn, T, g, _as_layers(g_t))
    load_torch_weights(nn, T, d, _as_layers(d_t))
    opt_g, opt_d = (optim.Adam(nn.state.get_parameters(m), lr=2e-3, b1=0.5) for m in (g, d))
    opt_g_t, opt_d_t = (torch.optim.Adam(m.parameters(), lr=2e-3, betas=(0.5, 0.999)) for m in (g_t, d_t))
    ours, theirs = [], []
    with T.train():
        for real, z in data:
            fake = g(T(z))
            opt_d.zero_grad()  # the discriminator: real as 1, fake (detached) as 0
            loss_d = d(T(real)).binary_crossentropy_logits(T.ones(8, 1)) + \
                d(fake.detach()).binary_crossentropy_logits(T.zeros(8, 1))
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()  # the generator: its fakes as 1
            loss_g = d(fake).binary_crossentropy_logits(T.ones(8, 1))
            loss_g.backward()
            opt_g.step()
            ours.append((loss_d.item(), loss_g.item()))
    bce = F.binary_cross_entropy_with_logits
    for real, z in data:
        fake = g_t(torch.from_numpy(z))
        opt_d_t.zero_grad()
        loss_d = bce(d_t(torch.from_numpy(real)), torch.ones(8, 1)) + bce(d_t(fake.detach()), torch.zeros(8, 1))
        loss_d.backward()
        opt_d_t.step()
        opt_g_t.zero_grad()
        loss_g = bce(d_t(fake), torch.ones(8, 1))
        loss_g.backward()
        opt_g_t.step()
        theirs.append((loss_d.item(), loss_g.item()))
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg="GAN (discriminator, generator) losses")


class _as_layers(torch.nn.Module):
    """A torch Sequential's state dict under our list's names: layers.0.weight for 0.weight."""

    def __init__(self, seq):
        super().__init__()
        self.layers = seq
