"""Extractors by name: the registry the model, the command line and its help read.

The extractors are grouped by family, one sub-package each (its docstring names the papers):
:mod:`.binary` (a binary variable per token: HardKuma, Bernoulli), :mod:`.subsets` (exactly k
tokens: SIMPLE, top-k, correlated top-k), :mod:`.marginalization` (sparse marginalization
over masks: SparseMAP, top-k sparsemax), :mod:`.attention` (attention, sparse attention);
the full-text baseline (:mod:`.full`) and a full-text model's saliency, fixed (:mod:`.saliency`,
``train --support reference``), belong to none. Adding an extractor is one module in
its family's folder (a :class:`~rationale_cli.models.selection.Selector` with its ``Options``,
``summary`` and ``default_encoder``) and one line here. Each takes the selector encoder's
output size first and its declared options, whole (``options=``, checked once where they were
made) or as keywords.
"""

from __future__ import annotations

from rationale_cli.models.options import OptionError, Options, Spec, specs
from rationale_cli.models.selection import Selector
from rationale_cli.models.selectors.attention.attention import AttentionSelector
from rationale_cli.models.selectors.attention.sparse_attention import SparseAttentionSelector
from rationale_cli.models.selectors.binary.bernoulli import BernoulliSelector
from rationale_cli.models.selectors.binary.hardkuma import HardKumaSelector
from rationale_cli.models.selectors.full import FullSelector
from rationale_cli.models.selectors.marginalization.sparsemap import SparseMAPSelector
from rationale_cli.models.selectors.marginalization.topk_sparsemax import TopKSparsemaxSelector
from rationale_cli.models.selectors.saliency import SaliencySelector
from rationale_cli.models.selectors.subsets.simple import SimpleSelector
from rationale_cli.models.selectors.subsets.topk import CorrelatedTopKSelector, TopKSelector

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
    "saliency": SaliencySelector,
}


def selector_class(name: str) -> type[Selector]:
    if name not in SELECTORS:
        raise ValueError(f"unknown extractor {name!r}: expected one of {', '.join(SELECTORS)}")
    return SELECTORS[name]


def option_specs(name: str) -> dict[str, Spec]:
    """The options extractor ``name`` declares, by name."""
    return specs(selector_class(name).Options)


def all_option_specs() -> dict[str, dict[str, Spec]]:
    """Every extractor option name -> {extractor: its declaration}."""
    table: dict[str, dict[str, Spec]] = {}
    for extractor in SELECTORS:
        for name, spec in option_specs(extractor).items():
            table.setdefault(name, {})[extractor] = spec
    return table


def build_selector(name: str, input_size: int, options: Options | None = None, **values) -> Selector:
    """The selector ``name`` with ``options``, its ``Options`` as made and checked once
    (a run's configuration holds them; kept as they are), or with ``values``, every one of
    which it must declare (an :class:`~rationale_cli.models.options.OptionError` otherwise)."""
    try:
        return selector_class(name)(input_size, options=options, **values)
    except OptionError as err:
        raise err.of(name) from None
