"""Two-stage training, ``train --support RUN``: a new predictor learns from the rationales a
trained run decodes (FRESH: Jain et al., 2020, "Learning to Faithfully Rationalize by
Construction", section 3: a support model selects, then a new classifier is trained on the
selected text alone).

The support run's selector side (extractor and its options, selector encoder, word vectors,
vocabulary, hidden size, whether the query is read) is copied into the new run and kept fixed;
in training as at test time it decodes each document at the support's budget, in whole
sentences unless ``--no-support-sentences``, and only the predictor learns. The result is a run
like any other: its own weights hold the copied selector, its config names the support.

``train --support reference``: the run's own full-text reference is the support, its words'
saliency (:meth:`~rationale_cli.runs.reference.Reference.word_saliency`) the table of the fixed
``saliency`` selector (:mod:`rationale_cli.models.selectors.saliency`), decoded in tokens unless
``--support-sentences``: FRESH with a linear full-text model's feature importance.
"""

from __future__ import annotations

import dataclasses

import torch

from rationale_cli.data.vocab import Vocab
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.config import TrainConfig
from rationale_cli.runs.reference import Reference
from rationale_cli.runs.run_directory import Run, load_run
from rationale_cli.runtime.errors import UserError

SELECTOR_SIDE = ("embed.", "selector_encoder.", "selector.")  # the parameter names of what selects


def supported(config: TrainConfig) -> tuple[TrainConfig, Run]:
    """The configuration of a run trained on ``config.support``'s rationales (the selector side
    the support's, the predictor ``--predictor-encoder``, else ``--encoder`` where given, else
    the support's; the size ``--support-budget``, else the support's own, which for a two-stage
    support is the size it decodes at) and the support run, loaded."""
    support = load_run(config.support)
    own = support.config
    predictor = config.predictor_encoder or (config.encoder if config.encoder != own.encoder else None) or \
        own.predictor_encoder or own.encoder
    selector = own.selector_encoder or own.encoder
    new = dataclasses.replace(config, extractor=own.extractor, options=own.options, encoder=own.encoder,
                              selector_encoder=selector, predictor_encoder=predictor,
                              embedding_dim=own.embedding_dim, hidden_size=own.hidden_size, embeddings=None,
                              fix_embeddings=True, pretrained=own.pretrained or config.pretrained, query=own.query,
                              support_budget=config.support_budget or own.support_budget)
    new.support_decoding()  # one error line now for a support without a budget
    return new, support


def copy_selector(model: RationaleModel, support: Run) -> None:
    """The support's selector side into ``model`` (whose own selector side it replaces)."""
    state = {k: v for k, v in support.model.state_dict().items() if k.startswith(SELECTOR_SIDE)}
    mine = {k for k in model.state_dict() if k.startswith(SELECTOR_SIDE)}
    if set(state) != mine:
        raise UserError(f"--support {support.path}: its selector does not fit this run's "
                        f"({len(set(state) ^ mine)} parameters differ)")
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as err:
        raise UserError(f"--support {support.path}: its selector does not fit this run's "
                        f"({str(err).splitlines()[-1].strip()})") from None


def fill_saliency(model: RationaleModel, reference: Reference, vocab: Vocab) -> None:
    """The saliency of each of ``vocab``'s words under ``reference`` into the model's fixed
    ``saliency`` selector (``train --support reference``)."""
    with torch.no_grad():
        model.selector.table.copy_(torch.from_numpy(reference.word_saliency(vocab.itos)))
