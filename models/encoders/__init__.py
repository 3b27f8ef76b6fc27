"""Encoders: ``encoder(x [B,T,D], mask [B,T]) -> (states [B,T,H], summary [B,H])``.

The mask is both the padding mask and, for the predictor, the rationale gate:
the composed model calls ``encoder(emb * z[..., None], pad_mask * z)``.

- ``rcnn`` (:class:`RCNNEncoder`): bigram RCNN of Lei et al. (2016), as in
  Bastings et al. (2019, App. B.1.1); the encoder of the beer experiments.
- ``lstm`` (:class:`LSTMEncoder`): LSTM cells with the same gating.
- ``cnn`` (:class:`CNNEncoder`): convolutions + ReLU + masked max-pooling
  (the L2X-style encoders of Paulus et al., 2020 and Ahmed et al., 2023);
- :class:`L2XEncoder`: the L2X selector network with a global and a local branch.

Named pairings of a selector encoder, a predictor encoder and an output head
(the papers' architectures) are in :mod:`models.architectures`.

Recurrent encoders *skip* steps with mask 0 (the state is carried over), so
padding and unselected tokens never change a result; fractional masks
interpolate. ``output_size`` is ``2 * hidden_size`` for bidirectional
recurrent encoders, ``hidden_size`` otherwise.
"""

from __future__ import annotations

from torch import Tensor, nn


class Encoder(nn.Module):
    """Base class: ``forward(x [B,T,D] float, mask [B,T] in [0,1]) -> (states
    [B,T,H], summary [B,H])``; states are zero where ``mask == 0``.

    ``skips_unselected``: as a predictor, whether the encoder reads the rationale
    gate as its mask (recurrent encoders skip unselected tokens) or the padding
    mask over the gated input (convolutions see zeros where z = 0, as in D.6 of
    Paulus et al., 2020, so an unselected token still gets a gradient)."""

    output_size: int
    skips_unselected: bool = True

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError


class RecurrentEncoder(Encoder):
    """Shared by the masked recurrent encoders: sizes, input dropout, and the
    empty-sequence case; subclasses implement ``scan(x, mask) -> (states, summary)``."""

    def __init__(self, input_size: int, hidden_size: int, *, bidirectional: bool = True, dropout: float = 0.0):
        super().__init__()
        self.directions = 2 if bidirectional else 1
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bidirectional = bidirectional
        self.output_size = self.directions * hidden_size
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        mask = mask.to(x.dtype)
        if x.shape[1] == 0:  # no steps: nothing to encode
            return x.new_zeros(*x.shape[:2], self.output_size), x.new_zeros(x.shape[0], self.output_size)
        return self.scan(self.dropout(x), mask)

    def scan(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bidirectional={self.bidirectional}"


# The concrete encoders import Encoder from here, so they come after it.
from models.encoders.cnn import CNNEncoder  # noqa: E402
from models.encoders.l2x import L2XEncoder  # noqa: E402
from models.encoders.lstm import LSTMEncoder  # noqa: E402
from models.encoders.rcnn import RCNNEncoder  # noqa: E402

ENCODERS = ("rcnn", "lstm", "cnn")

__all__ = ["ENCODERS", "CNNEncoder", "Encoder", "L2XEncoder", "LSTMEncoder", "RCNNEncoder", "build_encoder"]


def build_encoder(
    kind: str,
    input_size: int,
    hidden_size: int,
    *,
    bidirectional: bool = True,
    dropout: float = 0.0,
    kernel_size: int = 3,
    layers: int = 1,
) -> Encoder:
    """Encoder by name (one of :data:`ENCODERS`). ``bidirectional`` applies to
    the recurrent encoders, ``kernel_size`` (odd) and ``layers`` to the CNN."""
    if kind == "rcnn":
        return RCNNEncoder(input_size, hidden_size, bidirectional=bidirectional, dropout=dropout)
    if kind == "lstm":
        return LSTMEncoder(input_size, hidden_size, bidirectional=bidirectional, dropout=dropout)
    if kind == "cnn":
        return CNNEncoder(input_size, hidden_size, kernel_size=kernel_size, layers=layers, dropout=dropout)
    raise ValueError(f"unknown encoder {kind!r}; expected one of {', '.join(ENCODERS)}")
