"""Recurrent cells with torch's weights: weight_ih (gates * hidden, input), weight_hh (gates * hidden,
hidden) and two biases, all uniform(+-1/sqrt(hidden)), so torch's state dicts load as they are.

- LSTMCell: four gates in torch's order, input i, forget f, cell candidate g, output o:
  c' = sigmoid(f) * c + sigmoid(i) * tanh(g); h' = sigmoid(o) * tanh(c').
- GRUCell: three gates, reset r, update z, new n; the reset gate scales the hidden state's part of n
  after its bias (torch's and cuDNN's form): n = tanh(x_n + r * h_n); h' = (1 - z) * n + z * h.
- LSTM and GRU: num_layers cells stacked over a sequence, the input's projection for every time
  step computed as one matmul before the loop walks the steps.
A cell takes (batch, input) or an unbatched (input,) and starts from zeros when no state is given.
"""

from __future__ import annotations

import math

from ..errors import ArgumentError
from ..tensor import Tensor
from .linear import uniform_parameter


def _weights(owner, suffix: str, input_size: int, hidden_size: int, gates: int, bias: bool) -> None:
    """weight_ih, weight_hh, bias_ih, bias_hh (with a suffix: LSTM's _l0, _l1...) on owner."""
    bound = 1 / math.sqrt(hidden_size)
    setattr(owner, f"weight_ih{suffix}", uniform_parameter((gates * hidden_size, input_size), bound))
    setattr(owner, f"weight_hh{suffix}", uniform_parameter((gates * hidden_size, hidden_size), bound))
    setattr(owner, f"bias_ih{suffix}", uniform_parameter((gates * hidden_size,), bound) if bias else None)
    setattr(owner, f"bias_hh{suffix}", uniform_parameter((gates * hidden_size,), bound) if bias else None)


def _lstm_step(x_gates: Tensor, h: Tensor, c: Tensor, weight_hh: Tensor, bias_hh: Tensor | None):
    """One LSTM step from the input's part of the gates (x @ weight_ih.T + bias_ih)."""
    i, f, g, o = (x_gates + h.linear(weight_hh.T, bias_hh)).chunk(4, dim=-1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_step(x_gates: Tensor, h: Tensor, weight_hh: Tensor, bias_hh: Tensor | None) -> Tensor:
    """One GRU step from the input's part of the gates."""
    x_r, x_z, x_n = x_gates.chunk(3, dim=-1)
    h_r, h_z, h_n = h.linear(weight_hh.T, bias_hh).chunk(3, dim=-1)
    r, z = (x_r + h_r).sigmoid(), (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return (1 - z) * n + z * h


class _Cell:
    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        self.input_size, self.hidden_size = input_size, hidden_size
        _weights(self, "", input_size, hidden_size, self.gates, bias)

    def _batched(self, x: Tensor) -> Tensor:
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ArgumentError(f"{type(self).__name__}: expected an input ([batch,] {self.input_size}), got {x.shape}")
        return x if x.ndim == 2 else x.unsqueeze(0)

    def _state(self, x: Tensor, given: Tensor | None, unbatched: bool) -> Tensor:
        if given is None:
            return Tensor.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
        given = given.unsqueeze(0) if unbatched else given
        if given.shape != (x.shape[0], self.hidden_size):
            raise ArgumentError(f"{type(self).__name__}: a state of shape {(x.shape[0], self.hidden_size)} was "
                                f"expected for input {x.shape}, got {given.shape}")
        return given


class LSTMCell(_Cell):
    gates = 4

    def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """(h', c') from x and the state (h, c)."""
        unbatched, x = x.ndim == 1, self._batched(x)
        h, c = (None, None) if hc is None else hc
        h, c = self._state(x, h, unbatched), self._state(x, c, unbatched)
        h, c = _lstm_step(x.linear(self.weight_ih.T, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(_Cell):
    gates = 3

    def __call__(self, x: Tensor, h: Tensor | None = None) -> Tensor:
        """h' from x and the state h."""
        unbatched, x = x.ndim == 1, self._batched(x)
        h = _gru_step(x.linear(self.weight_ih.T, self.bias_ih), self._state(x, h, unbatched), self.weight_hh,
                      self.bias_hh)
        return h.squeeze(0) if unbatched else h


class _Stacked:
    """num_layers cells over a sequence, torch's LSTM and GRU without bidirectional or proj_size: input
    (T, B, input_size), or (B, T, ...) with batch_first; returns the last layer's h at every step and
    the final state of every layer, each (num_layers, B, hidden_size). dropout applies to every layer's
    output but the last, in training."""

    gates = 1
    states = 1  # tensors in a layer's state: (h,), or (h, c) for the LSTM

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0):
        name = type(self).__name__
        if bidirectional or proj_size:
            raise ArgumentError(f"{name}: bidirectional ({bidirectional}) and proj_size ({proj_size}) are not "
                                "supported")
        if num_layers < 1:
            raise ArgumentError(f"{name}: num_layers must be >= 1, got {num_layers}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.batch_first, self.dropout = batch_first, dropout
        for layer in range(num_layers):
            _weights(self, f"_l{layer}", input_size if layer == 0 else hidden_size, hidden_size, self.gates, bias)

    def _step(self, x_gates: Tensor, state: tuple, weight_hh: Tensor, bias_hh: Tensor | None) -> tuple:
        raise NotImplementedError

    def _run(self, x: Tensor, given: tuple | None):
        name = type(self).__name__
        if x.ndim != 3 or x.shape[-1] != self.input_size:
            raise ArgumentError(f"{name}: expected an input (T, B, {self.input_size}) (or (B, T, ...) with "
                                f"batch_first), got {x.shape}")
        x = x.transpose(0, 1) if self.batch_first else x
        state_shape = (self.num_layers, x.shape[1], self.hidden_size)
        if given is None:
            given = (Tensor.zeros(*state_shape, dtype=x.dtype, device=x.device),) * self.states
        if any(s.shape != state_shape for s in given):
            raise ArgumentError(f"{name}: the initial state must be {self.states} tensor(s) of shape {state_shape}, "
                                f"got {[s.shape for s in given]}")
        finals = []
        for layer in range(self.num_layers):
            w_ih, b_ih, w_hh, b_hh = (getattr(self, f"{n}_l{layer}") for n in ("weight_ih", "bias_ih", "weight_hh",
                                                                                "bias_hh"))
            x_gates = x.linear(w_ih.T, b_ih)  # (T, B, gates * H): every step's input part at once
            state, outputs = tuple(s[layer] for s in given), []
            for t in range(x.shape[0]):
                state = self._step(x_gates[t], state, w_hh, b_hh)
                outputs.append(state[0])
            x = outputs[0].stack(*outputs[1:])
            if layer < self.num_layers - 1 and self.dropout:
                x = x.dropout(self.dropout)
            finals.append(state)
        out = x.transpose(0, 1) if self.batch_first else x
        by_state = [[state[i] for state in finals] for i in range(self.states)]  # each: one tensor a layer
        return out, tuple(layers[0].stack(*layers[1:]) for layers in by_state)


class LSTM(_Stacked):
    """torch.nn.LSTM: `lstm(x, (h0, c0))` returns (output, (h_n, c_n))."""

    gates, states = 4, 2

    def _step(self, x_gates, state, weight_hh, bias_hh):
        return _lstm_step(x_gates, *state, weight_hh, bias_hh)

    def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None):
        return self._run(x, hc)


class GRU(_Stacked):
    """torch.nn.GRU: `gru(x, h0)` returns (output, h_n)."""

    gates = 3

    def _step(self, x_gates, state, weight_hh, bias_hh):
        return (_gru_step(x_gates, state[0], weight_hh, bias_hh),)

    def __call__(self, x: Tensor, h: Tensor | None = None):
        out, (h_n,) = self._run(x, None if h is None else (h,))
        return out, h_n
