"""Architectures by name: the selector encoder, the predictor encoder and the output head.

- ``rcnn``, ``lstm``, ``cnn``: that encoder on both sides and a linear output layer
  (Lei et al., 2016; Bastings et al., 2019, appendix B).
- ``l2x``: the L2X selector network (global and local branch, :mod:`models.encoders.l2x`;
  SIMPLE's beer setup, Ahmed et al., 2023, appendix C.3) and the convolutional predictor below.
- ``sst-simple`` / ``sst-complex``: the selectors of Paulus et al. (2020, appendix D.6):
  dropout and width-1 convolutions over the word embeddings (the selector's own
  linear maps), or first two convolutions of ``hidden`` filters of width 3 with ReLU.

The convolutional predictor of ``l2x`` and ``sst-*`` (D.6): two width-3 convolutions of
``hidden`` filters with ReLU over the masked embeddings, max-pooled, then dropout, a
``hidden``-unit ReLU layer and the output layer. The papers use 100 filters.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from models.encoders import ENCODERS, CNNEncoder, Encoder, L2XEncoder, build_encoder

ARCHITECTURES = (*ENCODERS, "l2x", "sst-simple", "sst-complex")


@dataclass
class Architecture:
    selector_encoder: Encoder | None
    predictor_encoder: Encoder
    output: nn.Module


def build_architecture(name: str, input_size: int, hidden_size: int, outputs: int, *, dropout: float,
                       needs_selector: bool) -> Architecture:
    """The parts of :data:`ARCHITECTURES` ``name``; no selector encoder when ``needs_selector`` is false."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown encoder {name!r}; expected one of {', '.join(ARCHITECTURES)}")
    if name in ENCODERS:
        selector = build_encoder(name, input_size, hidden_size, dropout=dropout)
        predictor = build_encoder(name, input_size, hidden_size, dropout=dropout)
        output = nn.Sequential(nn.Dropout(dropout), nn.Linear(predictor.output_size, outputs))
    else:
        if name == "l2x":
            selector = L2XEncoder(input_size, hidden_size, dropout=dropout)
        else:
            layers = 0 if name == "sst-simple" else 2
            selector = CNNEncoder(input_size, hidden_size, layers=layers, dropout=dropout)
        predictor = CNNEncoder(input_size, hidden_size, layers=2)
        output = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                               nn.Linear(hidden_size, outputs))
    return Architecture(selector if needs_selector else None, predictor, output)
