"""The full-text baseline: every token is selected (Lei et al., 2016, Table 1 setting)."""

from __future__ import annotations

from torch import Tensor

from rationale_cli.models.selection import Selection, Selector


class FullSelector(Selector):
    """Selects every non-pad token; the predictor reads the whole text."""

    needs_states = False
    summary = "every token: the full-text baseline"

    def __init__(self, input_size: int = 0, **options):
        super().__init__(**options)

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        return Selection.single(mask)

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        return mask, mask
