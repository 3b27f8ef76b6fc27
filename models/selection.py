"""The one interface every extractor implements (see the project's design notes).

A selector maps token states and a padding mask to a :class:`Selection`: a
weighted set of masks. One sample is ``S = 1``; sparse marginalization returns
its whole support. The trainer then computes

    loss = (weights * task_loss).sum(-1).mean() + penalty + surrogate(task_loss)

with no special case per method. A selection may also say how likely it made each token
(:class:`PerToken`), which rationale supervision pulls toward a gold rationale.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from rationale_cli.models.options import NoOptions, Options

# what a PerToken's values are, and so which loss rationale supervision takes on them
LOGIT = "logit"  # log-odds of selecting the token: binary cross-entropy from logits
PROBABILITY = "probability"  # a probability of selection in (0, 1): binary cross-entropy
GATE = "gate"  # a weight in [0, 1], no probability or exactly 0 off a sparse support: squared error
KINDS = (LOGIT, PROBABILITY, GATE)


@dataclass
class PerToken:
    """Each token's selection in training as one differentiable number: ``values`` ``[B, T]``,
    or ``[B, S, T]`` one row per mask of the selection (weighed by its weights), of the ``kind``
    named in :data:`KINDS`."""

    values: Tensor
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"PerToken kind {self.kind!r}: expected one of {', '.join(KINDS)}")


@dataclass
class Selection:
    """Masks ``[B, S, T]`` in [0, 1], weights ``[B, S]`` (rows sum to 1), a scalar
    penalty, an optional score-function ``surrogate(loss [B, S])`` built from
    detached losses, and ``stats`` for logging: scalar tensors, detached, turned into
    numbers once per epoch by the trainer (no device sync per step).
    ``constant_zeros``: the masks' zeros get no gradient (a sample exactly 0 whose
    derivative there is 0, as HardKuma's clamp), so the predictor may skip those steps
    in training as well; masks without gradient at all need no flag. ``per_token``: how
    likely each token was selected (:class:`PerToken`), None where no such number exists
    (the full text)."""

    masks: Tensor
    weights: Tensor
    penalty: Tensor
    surrogate: Callable[[Tensor], Tensor | None] | None = None
    stats: dict[str, Tensor] = field(default_factory=dict)
    constant_zeros: bool = False
    per_token: PerToken | None = None

    @staticmethod
    def single(mask: Tensor, penalty: Tensor | None = None, constant_zeros: bool = False,
               per_token: PerToken | None = None, **stats: Tensor) -> Selection:
        """One mask ``[B, T]`` with weight 1."""
        batch = mask.shape[0]
        return Selection(
            masks=mask.unsqueeze(1),
            weights=mask.new_ones(batch, 1),
            penalty=penalty if penalty is not None else mask.new_zeros(()),
            stats=dict(stats),
            constant_zeros=constant_zeros,
            per_token=per_token,
        )

    @staticmethod
    def joined(selections: list[Selection]) -> Selection:
        """Several selectors' selections of the same documents side by side, as one (several
        generators feeding one predictor: MGR, Liu et al. 2023, section 4): their masks in a
        row, each one's weights and penalty over their number, so the loss is the mean of the
        selectors' own losses; each one's surrogate reads its own masks' losses. The first
        selector's statistics and per-token probabilities are the joined one's (it is the one
        decoded at test time)."""
        count = len(selections)
        if count == 1:
            return selections[0]
        sizes = [s.masks.shape[1] for s in selections]
        surrogates = [(s.surrogate, start, size) for s, start, size in
                      zip(selections, [sum(sizes[:i]) for i in range(count)], sizes) if s.surrogate is not None]

        def surrogate(loss: Tensor) -> Tensor | None:
            terms = [t for t in (own(loss[:, start:start + size]) for own, start, size in surrogates) if t is not None]
            return sum(terms) / count if terms else None

        first = selections[0]
        return Selection(
            masks=torch.cat([s.masks for s in selections], 1),
            weights=torch.cat([s.weights for s in selections], 1) / count,
            penalty=sum(s.penalty for s in selections) / count,
            surrogate=surrogate if surrogates else None,
            stats=dict(first.stats),
            constant_zeros=all(s.skippable_zeros for s in selections),
            per_token=first.per_token,
        )

    @property
    def skippable_zeros(self) -> bool:
        """Whether a predictor may leave out the masks' zeros, gradients included."""
        return self.constant_zeros or not self.masks.requires_grad


class Selector(nn.Module):
    """Base class of extractors.

    ``Options``: the extractor's declared options (:mod:`rationale_cli.models.options`); the
    constructor takes them whole as ``options=``, already checked (a run's, as
    :func:`~rationale_cli.models.selectors.build_selector` passes them), or as keywords, checked
    here, and keeps them as ``self.options``.
    ``needs_states``: whether the model must run a selector encoder for it
    (``full`` does not); ``reads_ids``: whether it reads the word ids in place of states
    (``saliency``: it is built with the vocabulary's size). ``summary``: one line for whatever lists the extractors, naming
    options as placeholders (``{budget}``, :func:`rationale_cli.models.options.spelled`);
    ``default_encoder``: the architecture its runs get without ``--encoder``, the one measured best
    with its other defaults on the demo corpus (``benchmarks/demo_extractors.py --defaults``). ``decode_settings``: the
    test-time settings (:class:`rationale_cli.models.decoding.Decoding` fields) its :meth:`decode_with_scores`
    takes as keywords.
    Subclasses implement :meth:`forward` (training, stochastic where the method
    samples) and :meth:`decode_with_scores`: the deterministic test-time rationale
    (a mask ``[B, T]``) and a per-token score in [0, 1] shown to users beside it.
    """

    Options: type[Options] = NoOptions
    needs_states: bool = True
    reads_ids: bool = False
    summary: str = ""
    default_encoder: str = "rcnn"
    decode_settings: tuple[str, ...] = ()
    supervised_by: str = ""

    def __init__(self, options: Options | None = None, **values):
        super().__init__()
        name = type(self).__name__
        if options is None:
            options = self.Options.create(values)
        elif not isinstance(options, self.Options):
            raise TypeError(f"{name} takes its options as {self.Options.__name__}, not {type(options).__name__}")
        elif values:
            raise TypeError(f"{name}: options given whole and as keywords ({', '.join(values)}); give one or the other")
        self.options = options

    def forward(self, states: Tensor, mask: Tensor) -> Selection:  # pragma: no cover - abstract
        raise NotImplementedError

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:  # pragma: no cover
        raise NotImplementedError

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.decode_with_scores(states, mask)[0]

    def table_bytes(self, length: int) -> int:
        """The bytes a training step keeps in the extractor's tables for a document of ``length``
        tokens (a dynamic program's, for the backward pass) where they grow faster than the
        length, estimated from a measurement on CPU, so that a batch's memory can be bounded by
        them; 0 for an extractor without such tables."""
        return 0

    def token_scores(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.decode_with_scores(states, mask)[1]


def selected_share(z: Tensor, mask: Tensor) -> Tensor:
    """The share of real tokens with z > 0 (over every sample of ``z [..., T]``), detached."""
    mask = mask.expand_as(z)
    return (((z > 0).to(mask.dtype) * mask).sum() / mask.sum().clamp_min(1.0)).detach()
