"""Run directories: everything needed to use a trained model, and nothing that unpickles code.

``model.safetensors`` (weights), ``config.json`` (the resolved training options),
``vocab.json``, ``task.json`` (task and labels), ``metrics.json`` and
``versions.json``; the full-text reference (``reference.json`` and ``reference.safetensors``,
:mod:`rationale_cli.runs.reference`) unless trained without it; a run of a transformer encoder also ``transformer/``, its configuration and
tokenizer files (:mod:`rationale_cli.runs.pretrained`). Every file is written atomically, so an interrupted run never
leaves a broken model file behind.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.numpy import load_file as load_numpy
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import load_file, save_file

from rationale_cli.data.vocab import Vocab
from rationale_cli.models.encoders.hf import Pretrained
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.config import FROM_RUN, TrainConfig, from_saved, located, paths_from_run
from rationale_cli.runs.pretrained import run_transformer, save_transformer, transformers_version
from rationale_cli.runs.reference import Reference, from_files
from rationale_cli.runs.task import Task, task_from_dict
from rationale_cli.runtime.atomic import atomic_path, write_text_atomic
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.safe_json import finite
from rationale_cli.runtime.version import VERSION

FORMAT_VERSION = 1
WEIGHTS = "model.safetensors"
FILES = (WEIGHTS, "config.json", "vocab.json", "task.json", "versions.json")
REFERENCE = ("reference.json", "reference.safetensors")  # the full-text reference's two files
COMPLETE = "metrics.json"  # removed before an epoch's files are written, written last: a run without it is incomplete


def write_json(path: Path, data) -> None:
    """``data`` as JSON, atomically; a non-finite number is written as null, never NaN."""
    write_text_atomic(path, json.dumps(finite(data), indent=2, allow_nan=False) + "\n")


def versions() -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "rationale_cli": VERSION,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def build_model(config: TrainConfig, vocab_size: int, task: Task, embeddings=None, selector=None,
                pretrained: Pretrained | None = None) -> RationaleModel:
    """The model ``config`` describes; ``selector`` (a Selector subclass or instance) replaces its extractor;
    ``pretrained``: the transformer of an hf encoder."""
    return RationaleModel(
        vocab_size,
        config.embedding_dim,
        config.hidden_size,
        task.outputs,
        encoder=config.encoder,
        extractor=config.extractor if selector is None else selector,
        extractor_options=config.options if selector is None else None,
        dropout=config.dropout,
        embeddings=embeddings,
        freeze_embeddings=config.fix_embeddings,
        selector_encoder=config.selector_encoder,
        predictor_encoder=config.predictor_encoder,
        pretrained=pretrained,
        support=config.support_decoding(),
        share_encoder=config.share_encoder,
        generators=config.generators,
    )


def epoch_weights(run: Path, epoch: int) -> Path:
    """Where ``train --save-epochs`` keeps the weights of ``epoch``."""
    return run / "epochs" / f"epoch-{epoch}.safetensors"


def save_weights(out: Path, model: RationaleModel, epoch: int | None = None) -> None:
    """The model's weights as the run's kept weights, or as those of ``epoch``."""
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    path = out / WEIGHTS if epoch is None else epoch_weights(out, epoch)
    path.parent.mkdir(exist_ok=True)
    with atomic_path(path) as tmp:
        save_file(state, str(tmp))


def save_run(out: Path, config: TrainConfig, vocab: Vocab, task: Task, processes: int = 1) -> None:
    """Everything but the weights and metrics (written as training goes); ``processes``:
    how many trained the run (see :meth:`TrainConfig.to_dict`)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"{out}: cannot create the run directory ({err.strerror})") from None
    used = {**versions(), **({"transformers": transformers_version()} if config.pretrained else {})}
    write_json(out / "versions.json", used)  # first: it marks the folder as a run (runtime.outputs.is_run_directory)
    save_config(out, config, processes)
    vocab.save(out / "vocab.json")
    write_json(out / "task.json", task.to_dict())
    if config.pretrained:
        save_transformer(config.pretrained, out)


def save_config(out: Path, config: TrainConfig, processes: int = 1) -> None:
    """``config.json``: the options (:meth:`TrainConfig.to_dict`), and their paths as seen from
    the run directory ``out``, so that a run moved with its data finds it (:func:`located`)."""
    saved = config.to_dict(processes)
    write_json(out / "config.json", {**saved, FROM_RUN: paths_from_run(saved, out)})


def save_reference(out: Path, reference: Reference) -> None:
    """The full-text reference's two files (:data:`REFERENCE`) in the run directory ``out``."""
    data, arrays = reference.to_files()
    with atomic_path(out / REFERENCE[1]) as tmp:
        save_numpy(arrays, str(tmp))
    write_json(out / REFERENCE[0], data)


def load_reference(run: Path) -> Reference | None:
    """The full-text reference saved in the run directory ``run``; None where it has none
    (trained with ``--no-reference``, or before references were fitted)."""
    described, arrays = (run / name for name in REFERENCE)
    if not described.is_file():
        return None
    try:
        return from_files(json.loads(described.read_text(encoding="utf-8")), load_numpy(str(arrays)))
    except (OSError, ValueError, KeyError, TypeError, SafetensorError) as err:
        raise UserError(f"{described}: unreadable full-text reference ({type(err).__name__}: {err}); remove "
                        f"{described.name} and {arrays.name} to use the run without it") from None


@dataclass
class Run:
    path: Path
    config: TrainConfig
    vocab: Vocab
    task: Task
    model: RationaleModel
    reference: Reference | None = None  # the full-text reference fitted beside it


def read_json(path: Path, kind: type = dict):
    """A run directory's JSON file, which must hold a ``kind`` (an object by default)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; expected the JSON file `rationale train` wrote") from None
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (was the run directory moved or deleted?)") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read it ({err.strerror or err})") from None
    if not isinstance(data, kind):
        raise UserError(f"{path}: expected a JSON {'object' if kind is dict else kind.__name__}, "
                        f"found {type(data).__name__}")
    return data


def require_run_files(path: Path, complete: bool = True) -> None:
    """One clear error unless ``path`` is a folder holding every file of a run and, with
    ``complete``, the :data:`COMPLETE` file written last after every epoch (without it, training
    stopped while writing the run: a full disk, a crash)."""
    if not path.is_dir():
        raise UserError(f"{path}: not a run directory (expected a folder made by `rationale train`)")
    missing = [name for name in FILES if not (path / name).is_file()]
    if missing:
        raise UserError(f"{path}: incomplete run directory, missing {', '.join(missing)}; train it again "
                        f"(`rationale train ... --out {path} --force`) or remove it")
    if complete and not (path / COMPLETE).is_file():
        raise UserError(f"{path}: incomplete run: training stopped while writing its files ({COMPLETE} is "
                        f"missing); continue it with `rationale train --out {path} --resume`, or remove it")


def load_run(path: str | Path, device: str | torch.device = "cpu", epoch: int | None = None,
             config: TrainConfig | None = None, complete: bool = True) -> Run:
    """Load a run directory, checking its version and that weights match the config; with
    ``epoch``, the weights of that epoch (kept by ``train --save-epochs``) instead of the kept ones;
    ``config``: the run's configuration when the caller has read it already (``train --resume``),
    else read from config.json; ``complete`` False: also a run that stopped while writing its files
    (:func:`require_run_files`), which ``train --resume`` continues."""
    path = Path(path)
    require_run_files(path, complete)
    weights = path / WEIGHTS if epoch is None else epoch_weights(path, epoch)
    if not weights.is_file():
        saved = sorted(int(p.stem.split("-")[1]) for p in (path / "epochs").glob("epoch-*.safetensors"))
        raise UserError(f"{path}: no weights of epoch {epoch}; " + (
            f"the run kept epochs {', '.join(map(str, saved))}" if saved else
            "the run was trained without --save-epochs"))
    found = read_json(path / "versions.json").get("format_version")
    if found != FORMAT_VERSION:
        raise UserError(
            f"{path / 'versions.json'}: run format version {found}, this rationale-cli reads version {FORMAT_VERSION}"
        )
    if config is None:
        config = load_config(path)
    vocab = Vocab.load(path / "vocab.json")
    task = task_from_dict(read_json(path / "task.json"), str(path / "task.json"))
    pretrained = run_transformer(path, vocab.itos) if config.pretrained else None
    try:
        model = build_model(config, len(vocab), task, pretrained=pretrained)
    except ValueError as err:
        raise UserError(f"{path / 'config.json'}: {err}") from None
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError) as err:
        raise UserError(f"{weights}: unreadable weights ({err})") from None
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        detail = next((ln.strip() for ln in str(err).splitlines()[1:] if ln.strip()), "")
        raise UserError(f"{weights}: weights do not match config.json ({first} {detail})") from None
    model.to(device).eval()
    return Run(path, config, vocab, task, model, load_reference(path))


def load_config(run: Path) -> TrainConfig:
    """The training configuration saved in the run directory ``run``."""
    return from_saved(located(read_json(run / "config.json"), run), str(run / "config.json"))


def load_for_inference(run: str | Path, device: str, epoch: int | None = None) -> tuple[Run, torch.device]:
    """The run directory ``run`` loaded on ``device`` (auto resolved), and that device."""
    from rationale_cli.runtime.devices import resolve_device

    dev = resolve_device(device)
    return load_run(run, dev, epoch), dev
