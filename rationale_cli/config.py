"""Training options: defaults, a TOML config file, the command line (which wins).

The resolved configuration is saved in the run directory and is all that is
needed to rebuild the model when it is loaded again.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rationale_cli.errors import UserError


# each extractor's architecture in its paper's beer experiments (rcnn for the others)
DEFAULT_ENCODERS = {"simple": "l2x", "topk": "sst-complex", "corr-topk": "sst-complex"}
# the augmented-Lagrangian weight: REINFORCE's rate needs a firmer hold than HardKuma's
# (on beer, 1.0 let Bernoulli's rate swing between 3% and 23% at a 13% target; 20 held it within about a point)
DEFAULT_LAGRANGE_RHO = {"bernoulli": 20.0}


@dataclass
class TrainConfig:
    data: str = ""
    format: str = "auto"
    aspect: int | None = None
    valid: str | None = None
    valid_fraction: float = 0.1
    task: str = "auto"
    text_col: str = "text"
    label_col: str = "label"
    encoder: str | None = None
    extractor: str = "full"
    selection: float = 0.13
    transitions: float | None = None
    dependent: bool = False
    lagrange_lr: float = 0.05
    lagrange_rho: float | None = None
    sparsity: float = 0.0003
    coherence: float | None = None
    baseline: str = "ema"
    samples: int = 1
    lagrangian: bool = False
    exact_penalty: bool = True
    k: int = 10
    top_masks: int = 10
    pairwise: bool = False
    kl_weight: float = 0.0
    tau: float = 1.0
    straight_through: bool = False
    attention: str = "sparsemax"
    gamma: float = 1.0
    lam: float | None = None
    embeddings: str | None = None
    embedding_dim: int = 200
    fix_embeddings: bool = True
    hidden_size: int = 200
    dropout: float = 0.1
    min_freq: int = 1
    max_vocab: int | None = None
    epochs: int = 20
    batch_size: int = 256
    lr: float = 4e-4
    weight_decay: float = 1e-6
    lr_decay: float = 1.0
    clip: float = 5.0
    patience: int = 5
    time_limit: float = 0.0
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.encoder is None:
            self.encoder = DEFAULT_ENCODERS.get(self.extractor, "rcnn")
        if self.lagrange_rho is None:
            self.lagrange_rho = DEFAULT_LAGRANGE_RHO.get(self.extractor, 1.0)

    def extractor_options(self) -> dict[str, Any]:
        """Options a selector may take (each selector keeps the ones it knows)."""
        return {"selection": self.selection, "transitions": self.transitions, "dependent": self.dependent,
                "lagrange_lr": self.lagrange_lr, "lagrange_rho": self.lagrange_rho, "sparsity": self.sparsity,
                "coherence": self.coherence, "baseline": self.baseline, "samples": self.samples,
                "lagrangian": self.lagrangian, "exact_penalty": self.exact_penalty, "k": self.k, "top_masks": self.top_masks, "pairwise": self.pairwise, "kl_weight": self.kl_weight,
                "tau": self.tau, "straight_through": self.straight_through, "attention": self.attention,
                "gamma": self.gamma, "lam": self.lam}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FIELD_TYPES = {f.name: f.type for f in fields(TrainConfig)}


def coerce(name: str, value: Any, source: str) -> Any:
    """Check one option's type, converting ints to floats where a float is expected."""
    kind = FIELD_TYPES[name]
    if value is None:
        if "None" in kind:
            return None
        raise UserError(f"{source}: option {name!r} needs a value")
    base = kind.replace(" | None", "")
    if base == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if base == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if base == "bool" and isinstance(value, bool):
        return value
    if base == "str" and isinstance(value, str):
        return value
    raise UserError(f"{source}: option {name!r} expects {base}, got {value!r}")


def from_dict(data: dict[str, Any], source: str) -> dict[str, Any]:
    unknown = sorted(set(data) - set(FIELD_TYPES))
    if unknown:
        raise UserError(f"{source}: unknown option(s) {', '.join(unknown)}; known: {', '.join(FIELD_TYPES)}")
    return {name: coerce(name, value, source) for name, value in data.items()}


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
    return from_dict({key.replace("-", "_"): value for key, value in data.items()}, str(path))


def resolve(config_file: str | Path | None, cli: dict[str, Any]) -> TrainConfig:
    """Defaults, then the config file, then every command-line option that was given."""
    values: dict[str, Any] = {}
    if config_file is not None:
        values.update(load_toml(config_file))
    values.update({k: v for k, v in cli.items() if v is not None})
    return TrainConfig(**from_dict(values, "command line"))


RESUMABLE = ("data", "format", "aspect", "valid", "valid_fraction", "text_col", "label_col",
             "epochs", "time_limit", "patience", "device")


def resume_config(saved: dict[str, Any], cli: dict[str, Any], source: str) -> TrainConfig:
    """A run's saved options, with the few that may change when it goes on (``RESUMABLE``:
    where the data is read from, how long to train, the device) taken from the command line."""
    given = {k: v for k, v in cli.items() if v is not None}
    fixed = sorted(set(given) - set(RESUMABLE))
    if fixed:
        names = ", ".join("--" + name.replace("_", "-") for name in fixed)
        raise UserError(f"--resume goes on with the run's own options; it cannot change {names}")
    return TrainConfig(**{**from_dict(saved, source), **from_dict(given, "command line")})
