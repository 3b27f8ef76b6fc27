"""Remedies against degeneration, by name: the training options of the newer select-then-predict
papers, each with its paper, the option that turns it on, the value its paper uses and the
values a search tries.

Degeneration (Yu et al., 2019): the predictor learns from a not yet trained selector's
uninformative rationales, and the selector then learns to feed it those. Each remedy is one
option of ``rationale train`` and combines with every extractor whose selector learns from an
encoder's states (not ``full``, ``saliency`` or a fixed ``--support``); FR and MGR do not go
together (MGR's generators have encoders of their own).

- ``fr`` (Liu et al., 2022, section 3): one encoder for the selector and the predictor,
  :attr:`~rationale_cli.models.model.RationaleModel.predictor_encoder`.
- ``mgr`` (Liu et al., 2023, ACL, section 4): several generators, one predictor;
  :meth:`~rationale_cli.models.selection.Selection.joined`.
- ``mcd`` (Liu et al., 2023, NeurIPS, section 4): the predictor's output on the rationale held
  to its output on the full text by a KL divergence, the predictor also learning on the full
  text. This is the toolkit's full-text guidance (``--guidance``, after Huang et al., 2021,
  :func:`rationale_cli.training.loop.training_loss`), where the selector also learns from the
  task loss; ``--separate-guidance`` is MCD's own split: the selector learns from the divergence
  alone (never the label), the predictor from the task losses alone.
- ``dr`` (Liu et al., 2023, KDD): the predictor learns more slowly than the selector
  (``--predictor-lr``, :func:`rationale_cli.training.trainer.parameter_groups`).

``rationale tune --search-space examples/degeneration.toml`` searches them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rationale_cli.models.search import OneOf, Searched
from rationale_cli.models.selectors import selector_class
from rationale_cli.runs.flags import flag_of
from rationale_cli.runtime.errors import UserError


@dataclass(frozen=True)
class Remedy:
    """``option`` (a training option) at ``value`` turns the remedy on; ``search``: what a
    hyperparameter search of it tries (``value`` among them)."""

    paper: str
    summary: str
    option: str
    value: Any
    search: OneOf | Searched


REMEDIES: dict[str, Remedy] = {
    "fr": Remedy("Liu et al. 2022, FR: Folded Rationalization with a Unified Encoder (NeurIPS)",
                 "one encoder shared by the selector and the predictor", "share_encoder", True,
                 OneOf("share_encoder", (False, True))),
    "mgr": Remedy("Liu et al. 2023, MGR: Multi-generator Based Rationalization (ACL)",
                  "several selectors, each with its own encoder and learning rate, feed one predictor in "
                  "training; the first decodes", "generators", 3, OneOf("generators", (1, 2, 3))),
    "mcd": Remedy("Liu et al. 2023, D-Separation for Causal Self-Explanation (NeurIPS; MCD)",
                  "the prediction from the rationale held to the full text's by a KL divergence",
                  "guidance", 1.0, OneOf("guidance", (0.0, 0.5, 1.0, 2.0))),
    "dr": Remedy("Liu et al. 2023, Decoupled Rationalization with Asymmetric Learning Rates (KDD; DR)",
                 "the predictor learns at a fraction of the selector's learning rate", "predictor_lr", 0.2,
                 Searched("predictor_lr", 0.05, 1.0, log=True)),
}


def remedy_conflicts(config, extractor: str) -> None:
    """One error line (``config``: a TrainConfig) for a shared encoder or several generators where they cannot be: without a
    selector that learns from an encoder, with a fixed support, or together; for MCD's separation without guidance."""
    if config.separate_guidance and not config.guidance:
        raise UserError(f"{flag_of('separate_guidance')} splits full-text guidance's losses; give "
                        f"{flag_of('guidance')} WEIGHT above 0")
    used = [flag_of(name) for name, off in (("share_encoder", False), ("generators", 1))
            if getattr(config, name) != off]
    if not used:
        return
    kind = selector_class(extractor)
    if config.support or not kind.needs_states or kind.reads_ids:
        raise UserError(f"{' and '.join(used)} {'change' if len(used) > 1 else 'changes'} how a selector learns "
                        f"from its encoder; {extractor} "
                        f"{'is fixed here (' + flag_of('support') + ')' if config.support else 'has no encoder'}")
    if len(used) > 1:
        raise UserError(f"{used[0]} and {used[1]} do not go together (MGR's generators have encoders of their own)")
    if config.share_encoder:
        sides = {config.selector_encoder or config.encoder, config.predictor_encoder or config.encoder}
        if len(sides) > 1 or config.encoder in ("l2x", "sst-simple", "sst-complex"):
            raise UserError(f"{flag_of('share_encoder')} needs one kind of encoder on both sides; here they are "
                            f"{' and '.join(sorted(sides)) if len(sides) > 1 else config.encoder + ' (two kinds)'}")
