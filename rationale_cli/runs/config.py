"""Training options: defaults, a TOML config file, the command line (which wins).

Every option is declared once (:func:`rationale_cli.models.options.option`): the training options
here, each extractor's own in its selector module. The command line's flags, the TOML keys, the
configuration saved in a run directory and the checks all come from those declarations, through one
path (:func:`from_values`), so a value out of range or an option the chosen extractor does not take
is one clear error before anything is written. The extractor's options are checked there once, into
its ``Options``, which the configuration holds and hands whole to the selector. The resolved
configuration is all that is needed to rebuild the model when it is loaded again."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rationale_cli.data.readers import FORMATS
from rationale_cli.data.sources import is_demo
from rationale_cli.models.architectures import ARCHITECTURES, PREDICTOR_SIDES, SIDES, TRANSFORMER
from rationale_cli.models.budget import Budget
from rationale_cli.models.decoding import Decoding
from rationale_cli.models.options import OptionError, Options, Spec, option, specs, to_json
from rationale_cli.models.search import OneOf, Searched
from rationale_cli.models.selectors import SELECTORS, all_option_specs, selector_class
from rationale_cli.runs.flags import flag_of, option_line
from rationale_cli.runs.keep import Keep
from rationale_cli.runs.reference import REFERENCE_SUPPORT, check_linear_predictor, support_extractor
from rationale_cli.runs.remedies import remedy_conflicts
from rationale_cli.runtime.devices import DEVICE_NAME
from rationale_cli.runtime.errors import UserError

# the training options a support run's own replace in a run on its rationales (rationale_cli.training.support)
FROM_SUPPORT = ("extractor", "selector_encoder", "embeddings", "embedding_dim", "fix_embeddings", "hidden_size",
                "min_freq", "max_vocab", "query")
# old names of --budget, kept for one release: a share, and a token count
ALIASES = {"selection": float, "k": int}
# extractors whose old config held their size in ``k`` (the others in ``selection``)
COUNTED = ("simple", "topk", "corr-topk")


@dataclass
class TrainConfig:
    data: str = option("", "Training data: a file, an ERASER folder, or 'demo'.",
                       default_text="none: give it here or as data = ... in --config")
    format: str = option("auto", "Input format.", choices=FORMATS)
    aspect: int | None = option(None, "Beer aspect: 0 appearance, 1 aroma, 2 palate, 3 taste, 4 overall.",
                                low=0, high=4, default_text="N of reviews.aspectN")
    valid: str | None = option(None, "Validation data.", default_text="the data's own split, else a share "
                               "of the training data")
    valid_fraction: float = option(0.1, "Share held out for validation when --valid is not given.", above=0.0, high=0.9)
    task: str = option("auto", "auto (numbers: regression, strings: classification), regression or "
                       "classification.", choices=("auto", "regression", "classification"))
    text_col: str = option("text", "CSV/TSV text column.")
    label_col: str = option("label", "CSV/TSV label column.")
    id_col: str = option("id", "CSV/TSV column (JSONL field) of each document's id, kept in the run: predict, "
                         "explain and evaluate read ids from it unless given another; '' numbers the rows.",
                         default_text="id where the table has one, else the row number")
    rationale_label: str | None = option(None, "The label of the spans that are the gold rationale in an annotation "
                                         "tool's file (Label Studio, Prodigy, doccano, spaCy).", default_text="any")
    spans_key: str = option("rationale", "The span group of a .spacy file that holds the gold rationale.")
    query: bool = option(True, "Let the model read each document's query (ERASER's BoolQ, FEVER, MultiRC, "
                         "CoS-E): after the document and a [SEP] token, never selected.")
    extractor: str = option("hardkuma", "Rationale extractor (see the list below).", choices=SELECTORS)
    encoder: str | None = option(None, "Architecture (selector and predictor encoders); hf: a pretrained "
                                 "transformer, from {pretrained}.", choices=(*ARCHITECTURES, TRANSFORMER),
                                 default_text="rcnn, measured best for every extractor with its other "
                                 "defaults on the demo corpus")
    selector_encoder: str | None = option(None, "The selector's encoder, when it differs from the predictor's "
                                          "(with a linear output layer).", choices=SIDES, default_text="{encoder}'s")
    predictor_encoder: str | None = option(None, "The predictor's encoder, when it differs from the selector's "
                                           "(with a linear output layer). linear: a TF-IDF n-gram model fitted on "
                                           "{support}'s rationales, or without one the full-text reference, fixed.",
                                           choices=PREDICTOR_SIDES, default_text="{encoder}'s")
    pretrained: str | None = option(None, "The transformer of an hf encoder: a local folder (config, weights and "
                                    "tokenizer files; works offline) or a Hugging Face hub name.",
                                    default_text="none")
    freeze_layers: int = option(0, "Keep a transformer's embeddings and its first N layers fixed (-1: the whole "
                                "transformer), on each hf side: fewer weights to learn, and a frozen selector "
                                "transformer trains without its backward.", low=-1)
    pretrained_lr: float | None = option(None, "The learning rate of a transformer's own weights (times "
                                         "{predictor_lr} on the predictor's side), e.g. 5e-5 beside an {lr} of "
                                         "0.002 for the rest.", above=0.0, high=1e6, default_text="{lr}")
    support: str | None = option(None, "Two-stage training: a trained run whose selector decodes each document's "
                                 "rationale at its budget, fixed, and a new predictor ({predictor_encoder} or "
                                 "{encoder}) learns from the rationales alone (Jain et al. 2020, FRESH). The "
                                 "selector side (extractor, its options, selector encoder, vocabulary, word "
                                 "vectors, hidden size) is the run's, copied into this one. The word 'reference' "
                                 "(./reference for a path of that name): the run's own full-text reference selects "
                                 "by its words' weights (the saliency extractor, {budget} and --window).",
                                 default_text="none")
    support_sentences: bool | None = option(None, "With {support}: decode the rationales in whole sentences (each "
                                            "document keeps the support's count of tokens, in the sentences that "
                                            "score highest).",
                                            default_text="sentences for a run, tokens for the reference")
    support_budget: Budget | None = option(None, "With {support}: decode the rationales at this size (a share or a "
                                           "token count) instead of the support's own budget, e.g. to choose it on "
                                           "validation.", default_text="the support's {budget}")
    embeddings: str | None = option(None, "Pretrained word vectors, GloVe or word2vec text (.gz too).")
    embedding_dim: int = option(200, "Embedding size without --embeddings.", low=1, high=1 << 16)
    fix_embeddings: bool | None = option(None, "Keep the embeddings fixed.",
                                         default_text="fixed with --embeddings, trained without")
    hidden_size: int = option(200, "Encoder hidden size per direction (filters for convolutions).", low=1, high=1 << 16)
    dropout: float = option(0.1, "Dropout.", low=0.0, high=0.9)
    min_freq: int = option(1, "Minimum token frequency for the vocabulary.", low=1)
    max_vocab: int | None = option(None, "Maximum vocabulary size.", low=2, default_text="unlimited")
    epochs: int = option(20, "Maximum epochs.", low=1)
    batch_size: int = option(64, "Batch size (64 with --lr 0.001: the best measured in every beer protocol, "
                             "benchmarks/RESULTS.md; the papers' 256 with 0.0004 trains too few steps on a small "
                             "corpus).", low=1)
    lr: float = option(1e-3, "Adam learning rate; useful ones are far below 1 (larger ones only make training "
                       "diverge), and the bound keeps Adam's first step within 32-bit floats.", above=0.0, high=1e6)
    weight_decay: float = option(1e-6, "Weight decay.", low=0.0)
    lr_decay: float = option(1.0, "Multiply the learning rate by this when validation loss does not improve "
                             "(1: off).", above=0.0, high=1.0)
    lr_final: float = option(1.0, "Decay the learning rate linearly, update by update, to this multiple of --lr "
                             "over --lr-decay-epochs, then hold it (the schedule of Paulus et al., 2020, "
                             "appendix D.6; 1: off).", above=0.0, high=1.0)
    lr_decay_epochs: int | None = option(None, "Epochs of the linear decay to --lr-final.", low=1,
                                         default_text="all --epochs")
    predictor_lr: float = option(1.0, "The predictor's learning rate as a multiple of {lr}: below 1, the "
                                 "predictor learns more slowly than the selector, against degeneration (decoupled "
                                 "rates, Liu et al. 2023).", above=0.0, high=1e6)
    guidance: float = option(0.0, "Weight of full-text guidance against degeneration: the predictor also learns "
                             "on the full text, and its output on the rationale is pulled toward it (a KL "
                             "divergence; squared difference for scores; Huang et al. 2021; MCD), 0 = off.", low=0.0)
    separate_guidance: bool = option(False, "With {guidance}: the selector learns from the divergence alone, never the "
                                     "label, and the predictor from the task losses alone (MCD, Liu et al. 2023).")
    balance_classes: bool = option(False, "Train each epoch on the rarest class and an equal fresh draw of "
                                   "every other class (classification): unbalanced data, balanced epochs.")
    share_encoder: bool = option(False, "Against degeneration, one encoder for both sides: the predictor reads "
                                 "the rationale with the selector's (FR, Liu et al. 2022).")
    generators: int = option(1, "Against degeneration, N selectors feed the predictor in training, selector N at "
                             "N times the rate; the first decodes (MGR, Liu et al. 2023).", low=1, high=16)
    supervise: float = option(0.0, "Rationale supervision: weight of a per-token loss between the selector's "
                              "selection and the gold rationale, on the training documents that have one (the "
                              "others train as without; Zhang et al. 2016, ERASER's supervised rows), 0 = off.",
                              low=0.0)
    supervise_fraction: float = option(1.0, "With {supervise}: the share of the training documents with gold whose "
                                       "gold is used (a subset drawn with {seed}; the others' gold is ignored), to "
                                       "measure what fewer annotations give.", above=0.0, high=1.0)
    clip: float = option(5.0, "Gradient norm clipping, 0 = off.", low=0.0)
    patience: int = option(5, "Early stopping after this many epochs without improvement (none counts while an "
                           "extractor holding a rate decodes under half of it), 0 = off.", low=0)
    keep: str = option("best-loss", "The epoch whose weights are kept: best-loss (lowest validation loss) or "
                       "best-loss-at-rate (the lowest among epochs whose decoded validation selection rate is "
                       "within --rate-tolerance of the --budget target; extractors that hold a rate).",
                       choices=("best-loss", "best-loss-at-rate"))
    rate_tolerance: float = option(0.02, "How far from the target (a share: 0.02 = 2 points) a kept epoch's "
                                   "validation rate may be, with --keep best-loss-at-rate.", low=0.0, high=1.0)
    save_epochs: bool = option(False, "Also keep every epoch's weights, in epochs/epoch-N.safetensors of the run "
                               "directory (each as large as model.safetensors), for `evaluate --epoch N`.")
    time_limit: float = option(0.0, "Minutes of training at most: no epoch is started that the slowest one "
                               "so far says would end later, 0 = off.", low=0.0)
    reference: bool = option(True, "Also fit the full-text reference: a TF-IDF n-gram linear model on the whole text "
                             "(logistic or ridge regression, chosen on the validation split), scored beside the "
                             "model wherever the run is, to show what reading only the rationale costs.")
    seed: int = option(0, "Random seed.", low=0)
    device: str = option("auto", "auto, cpu, cuda or cuda:N.")
    options: Options | None = None  # the extractor's own, declared by its selector
    supervised: int | None = None  # with supervise: how many training documents' gold was used (the trainer's count)

    # the training options' search space (rationale_cli.models.search), shared by every extractor beside its own:
    # the learning rate and weight decay of Paulus et al. (2020), appendix D.6 (learning rates from {1, 3, 5, 10,
    # 30, 50, 100} x 1e-4, weight decay from {0, 1, 10, 100} x 1e-6), the dropout of Bastings et al. (2019),
    # appendix B (0.1 to 0.5 over their tasks), the sizes of their encoders (Bastings's 200, Paulus's 100
    # filters, and a smaller one), and batches around the 64 measured best here
    search_space: ClassVar[tuple] = (
        Searched("lr", 1e-4, 1e-2, log=True),
        OneOf("weight_decay", (0.0, 1e-6, 1e-5, 1e-4)),
        Searched("dropout", 0.0, 0.5),
        OneOf("hidden_size", (50, 100, 200)),
        OneOf("batch_size", (32, 64, 128)),
    )

    def __post_init__(self) -> None:
        cls = selector_class(self.extractor)
        if self.encoder is None:
            self.encoder = cls.default_encoder
        if self.fix_embeddings is None:
            self.fix_embeddings = bool(self.embeddings)
        if self.options is None:
            self.options = cls.Options()

    def rate_target(self) -> float | None:
        """The selection rate the extractor holds in training (a share; its budget declared
        ``use=BudgetUse.HELD``, :meth:`~rationale_cli.models.options.Options.held_budget`), else None;
        None with a support, whose selector is fixed and decodes at its size."""
        budget = None if self.support else self.options.held_budget()
        return None if budget is None else budget.share

    def support_decoding(self) -> Decoding | None:
        """How the fixed selector of a two-stage run decodes (:mod:`rationale_cli.training.support`):
        at its budget, in sentences if asked; None for a run without support."""
        if not self.support:
            return None
        # the size asked for, else a rate held, an exact size, a cap or the test-time size
        budget = self.support_budget or self.options.held_budget(any_use=True)
        if budget is None:
            raise UserError(f"--support {self.support}: its {self.extractor} extractor has no budget that sizes its "
                            "rationales (--budget) to decode at; give a run of an extractor with a budget")
        sentences = self.support != REFERENCE_SUPPORT if self.support_sentences is None else self.support_sentences
        return Decoding(rate=budget, sentences=sentences)

    def keep_rule(self):
        """The rule choosing the kept epoch (:class:`rationale_cli.runs.keep.Keep`)."""
        rate = self.rate_target()
        return Keep(held=rate) if self.keep == "best-loss" else Keep(rate, self.rate_tolerance)

    def to_dict(self, processes: int = 1) -> dict[str, Any]:
        """Every training option and the extractor's own options, JSON-ready (the saved
        config), paths absolute; for a run on several processes, their number and the effective batch."""
        general = {spec.name: to_json(getattr(self, spec.name)) for spec in TRAIN_SPECS.values()}
        run = {"processes": processes, "effective_batch_size": self.batch_size * processes} if processes > 1 else {}
        if self.supervise and self.supervised is not None:
            run[SUPERVISED] = self.supervised
        paths = {name: os.path.abspath(general[name]) for name in PATH_OPTIONS if is_path(general[name], name)}
        return {**general, **paths, **self.options.to_dict(), **run}


TRAIN_SPECS: dict[str, Spec] = specs(TrainConfig)
# the options naming a file or folder: saved as absolute paths, and as paths from the run directory
PATH_OPTIONS = ("data", "valid", "embeddings", "support")
FROM_RUN = "paths_from_run"
SUPERVISED = "supervised_documents"  # how many training documents' gold supervised the run
# what a saved config holds beside its options: how the run was trained, where its paths lie from it
RUN_FACTS = ("processes", "effective_batch_size", SUPERVISED, FROM_RUN)
SHAPES = ("embedding_dim", "hidden_size", "generators")  # options a saved run's range is checked for: they size the model


def is_path(value, name: str) -> bool:
    """Whether option ``name``'s value names a file or folder (not unset, not the built-in
    ``demo``, not ``--support reference``)."""
    return isinstance(value, str) and value != "" and not is_demo(value) and \
        not (name == "support" and value == REFERENCE_SUPPORT)


def paths_from_run(saved: dict[str, Any], run: Path) -> dict[str, str]:
    """The saved paths as seen from the run directory ``run``, to find them again when the run
    and its data are moved together (:func:`located`)."""
    return {name: os.path.relpath(saved[name], os.path.abspath(run))
            for name in PATH_OPTIONS if is_path(saved.get(name), name)}


def located(saved: dict[str, Any], run: Path) -> dict[str, Any]:
    """A saved config with its paths where they are now: as saved where that exists, else
    where :func:`paths_from_run` finds them from ``run`` (the run and its data moved together),
    else as saved (a run saved before absolute paths reads its own from the working
    directory, as it always did)."""
    moved = saved.get(FROM_RUN)
    out = dict(saved)
    for name in PATH_OPTIONS if isinstance(moved, dict) else ():
        there = moved.get(name)
        if is_path(saved.get(name), name) and not Path(saved[name]).exists() and isinstance(there, str) \
                and (run / there).exists():
            out[name] = os.path.abspath(run / there)
    return out


def known_options() -> list[str]:
    return [*TRAIN_SPECS, *all_option_specs()]


def check_known(values: dict[str, Any], source: str) -> None:
    """One error line for a name that no option has."""
    unknown = sorted(set(values) - set(known_options()))
    if unknown:
        known = ", ".join(map(flag_of, known_options()))
        raise UserError(f"{source}unknown option {flag_of(unknown[0])}; known: {known}")


def from_values(values: dict[str, Any], given: set[str] | None = None, ranges: bool = True) -> TrainConfig:
    """The one path from option values to a configuration: values of the declared type
    and range, extractor options declared by the chosen extractor, and ``given`` (what a
    user gave) not needing an option that is off; an :class:`OptionError` otherwise.
    ``ranges=False`` leaves the training options' ranges unchecked (a saved run's, which
    only matter for training it) but for the model's sizes (``SHAPES``: the model is built
    from them before its weights are read)."""
    check_known(values, "")
    general = {name: TRAIN_SPECS[name].check(value, ranges or name in SHAPES) for name, value in values.items()
               if name in TRAIN_SPECS}
    if not DEVICE_NAME.fullmatch(general.get("device", "auto")):
        raise OptionError("device", general["device"], "auto, cpu, cuda or cuda:N")
    extractor = support_extractor(general, given, general.get("extractor", TRAIN_SPECS["extractor"].default))
    check_linear_predictor(general)
    own = {name: value for name, value in values.items() if name not in TRAIN_SPECS}
    check_support_given(general, set(given or ()) & {*FROM_SUPPORT, "support_sentences", "support_budget", *own})
    try:
        options = selector_class(extractor).Options.create(own, given=set(given or ()) & set(own))
    except OptionError as err:
        raise err.of(extractor) from None
    config = TrainConfig(**general, options=options)
    hf = TRANSFORMER in (config.encoder, config.selector_encoder, config.predictor_encoder)
    if hf != bool(config.pretrained):
        raise UserError(f"--encoder hf (on either side) needs {flag_of('pretrained')} NAME_OR_PATH, a transformer's "
                        "folder or hub name" if hf else f"{flag_of('pretrained')} applies to an hf encoder only")
    for name, off in (("freeze_layers", 0), ("pretrained_lr", None)):
        if not hf and getattr(config, name) != off:
            raise UserError(f"{flag_of(name)} applies to an hf encoder only")
    if config.supervise and not selector_class(extractor).supervised_by:
        raise OptionError("supervise", config.supervise, "0: it selects no tokens of its own, so it has no "
                          "per-token selection to supervise", extractor=extractor)
    if config.supervise and config.support:
        raise UserError(f"{flag_of('supervise')} trains a selector; with {flag_of('support')} the selector is fixed "
                        "and only the predictor learns")
    if config.supervise_fraction != 1.0 and not config.supervise:
        raise UserError(f"{flag_of('supervise_fraction')} applies only with {flag_of('supervise')} WEIGHT above 0")
    remedy_conflicts(config, extractor)
    if ranges and config.keep == "best-loss-at-rate" and config.rate_target() is None:  # a saved run loads as it is
        raise OptionError("keep", config.keep, "best-loss (best-loss-at-rate needs a selection rate held in "
                          "training: a share as {budget}, and {lagrangian} for bernoulli)", extractor=extractor)
    return config


def check_support_given(general: dict[str, Any], given: set[str]) -> None:
    """One error line where ``given`` (the selector's options and the support's that a user gave)
    would be dropped unseen: a support run's selector is fixed with its own extractor and options
    (its size changes with ``--support-budget``; the reference's with ``--budget``), and the
    support's options need a support."""
    support = general.get("support")
    if not support:
        if named := sorted(given & {"support_sentences", "support_budget"}):
            raise UserError(f"{flag_of(named[0])} applies only with {flag_of('support')}")
        return
    if support == REFERENCE_SUPPORT and "support_budget" in given:
        raise UserError(f"--support {REFERENCE_SUPPORT} selects with the saliency extractor, sized by "
                        f"{flag_of('budget')}; leave out {flag_of('support_budget')}")
    fixed = sorted(given - {"support_sentences", "support_budget"})
    if support != REFERENCE_SUPPORT and fixed:
        size = f" (to decode its rationales at another size: {flag_of('support_budget')})" if "budget" in fixed else ""
        raise UserError(f"--support {support}: the run's selector is fixed, with its own extractor, options, "
                        f"vocabulary, vectors and sizes; leave out {', '.join(map(flag_of, fixed))}{size}")


def with_aliases(values: dict[str, Any]) -> dict[str, Any]:
    """``selection`` (a share) and ``k`` (a count) as ``budget``; more than one is refused."""
    named = [name for name in ("budget", *ALIASES) if values.get(name) is not None]
    if len(named) > 1:
        raise UserError(f"{' and '.join(map(flag_of, named))} both set the rationale's size; give --budget alone")
    out = {k: v for k, v in values.items() if k not in ALIASES}
    for name, kind in ALIASES.items():
        value = values.get(name)
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is int and number and value != int(value):
            raise UserError(f"{flag_of(name)} {value}: expected a whole number of tokens")
        out["budget"] = kind(value) if number else value
    return out


def load_toml(path: str | Path) -> dict[str, Any]:
    """Options from a TOML file: top-level keys, or a ``[train]`` table; dashes allowed in keys."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: config file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: not valid TOML ({err})") from None
    data = data.get("train", data)
    return {key.replace("-", "_"): value for key, value in data.items()}


def resolve(config_file: str | Path | None, cli: dict[str, Any]) -> TrainConfig:
    """Defaults, then the config file, then every command-line option that was given;
    an error names the config file when the value came from there."""
    from_file = with_aliases(load_toml(config_file)) if config_file is not None else {}
    check_known(from_file, f"{config_file}: ")
    from_cli = with_aliases({k: v for k, v in cli.items() if v is not None})
    values = {**from_file, **from_cli}
    try:
        return from_values(values, given=set(values))
    except OptionError as err:
        where = f"{config_file}: " if err.name in from_file and err.name not in from_cli else ""
        old = [flag_of(name) for name in ALIASES if cli.get(name) is not None]
        said = f" (given as {old[0]})" if err.name == "budget" and old else ""
        raise UserError(f"{where}{option_line(err)}{said}") from None


def from_saved(data: dict[str, Any], source: str) -> TrainConfig:
    """The configuration saved in a run directory. Runs saved before ``budget`` held every
    extractor's options and the size as ``selection`` or ``k``: the chosen extractor's
    are kept (the others were never used) and the size becomes its budget. ``RUN_FACTS``
    are not options: they are left out."""
    data = {k: v for k, v in data.items() if k not in RUN_FACTS}
    data.setdefault("query", False)  # runs saved before queries were read did not read them
    if "budget" not in data and isinstance(data.get("extractor"), str) and data["extractor"] in SELECTORS:
        extractor = data["extractor"]
        own = specs(selector_class(extractor).Options)
        size = data.get("k", 10) if extractor in COUNTED else data.get("selection", 0.13)
        data = {k: v for k, v in data.items() if k in TRAIN_SPECS or k in own}
        if "budget" in own:
            data["budget"] = size
    try:
        return from_values(data, ranges=False)
    except (OptionError, UserError) as err:
        raise UserError(f"{source}: {option_line(err) if isinstance(err, OptionError) else err}") from None
