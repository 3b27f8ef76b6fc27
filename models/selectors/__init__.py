"""Extractors by name. Each takes the selector encoder's output size first;
other keyword options are passed through when the class accepts them."""

from __future__ import annotations

import inspect

from models.selection import Selector
from models.selectors.attention import AttentionSelector
from models.selectors.bernoulli import BernoulliSelector
from models.selectors.full import FullSelector
from models.selectors.hardkuma import HardKumaSelector
from models.selectors.simple import SimpleSelector
from models.selectors.sparse_attention import SparseAttentionSelector
from models.selectors.sparsemap import SparseMAPSelector
from models.selectors.topk import CorrelatedTopKSelector, TopKSelector
from models.selectors.topk_sparsemax import TopKSparsemaxSelector

SELECTORS: dict[str, type[Selector]] = {
    "full": FullSelector,
    "attention": AttentionSelector,
    "hardkuma": HardKumaSelector,
    "bernoulli": BernoulliSelector,
    "simple": SimpleSelector,
    "topk": TopKSelector,
    "corr-topk": CorrelatedTopKSelector,
    "sparse-attention": SparseAttentionSelector,
    "sparsemap": SparseMAPSelector,
    "topk-sparsemax": TopKSparsemaxSelector,
}


def selector_class(name: str) -> type[Selector]:
    if name not in SELECTORS:
        raise ValueError(f"unknown extractor {name!r}: expected one of {', '.join(SELECTORS)}")
    return SELECTORS[name]


def build_selector(name: str, input_size: int, **options) -> Selector:
    """The selector ``name``; options it does not take are ignored."""
    cls = selector_class(name)
    accepted = inspect.signature(cls.__init__).parameters
    return cls(input_size, **{k: v for k, v in options.items() if k in accepted})
