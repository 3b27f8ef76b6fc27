"""Base classes of the encoders: :class:`Encoder` and the masked :class:`RecurrentEncoder`."""

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
