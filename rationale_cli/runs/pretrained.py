"""A pretrained transformer for ``--encoder hf`` (the ``hf`` extra: ``transformers`` and ``tokenizers``):
read through the Auto classes from a folder or a hub name, its vocabulary words' subword
pieces (:class:`rationale_cli.models.encoders.hf.Pretrained`), and the copy of its configuration and
tokenizer a run directory keeps (``transformer/``; the weights are in ``model.safetensors``),
so that a run is used offline and without the folder it was trained from.

Each vocabulary word is tokenized once, alone (at most :data:`MAX_PIECES` subwords kept). A
word outside the run's vocabulary is ``<unk>``, which the transformer reads as its tokenizer's
unknown token, as the static encoders read it as the unknown word's vector.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

import torch

from rationale_cli.data.batching import SEP
from rationale_cli.data.vocab import PAD, UNK
from rationale_cli.models.encoders.hf import Pretrained
from rationale_cli.runtime.errors import UserError

FOLDER = "transformer"  # in a run directory
MAX_PIECES = 16  # subwords kept of one word
HUB_SECONDS = 5  # to connect to the hub, for a name not in its local cache


def auto_classes():
    """``transformers``' AutoConfig, AutoModel and AutoTokenizer, or one error line naming the extra."""
    try:
        from transformers import AutoConfig, AutoModel, AutoTokenizer
        from transformers.utils import logging
    except ImportError:
        raise UserError("--encoder hf needs the transformers library: pip install 'rationale-cli[hf]'") from None
    logging.disable_progress_bar()  # the toolkit reports its own progress; loading a folder takes no time
    return AutoConfig, AutoModel, AutoTokenizer


def transformers_version() -> str:
    """The version of ``transformers``, for a run's ``versions.json``."""
    import transformers

    return transformers.__version__


def check_source(source: str) -> None:
    """One error line for a local path that is not a folder, and at once (not after a minute of
    the library's retries) for a hub name neither in the hub's local cache nor reachable."""
    path = Path(source).expanduser()
    local = path.exists() or source.startswith((".", "/", "~")) or source.count("/") > 1
    if local and not path.is_dir():
        raise UserError(f"--pretrained {source}: no such folder (expected a transformer's folder, with its "
                        "config.json and tokenizer files, or a hub name)")
    why = None if local else offline(source)
    if why is not None:
        raise UserError(f"--pretrained {source}: not in the local cache of the hub, and {why}; download it "
                        "where the hub can be reached, or give its folder")


def offline(name: str) -> str | None:
    """Why the hub name ``name`` cannot be had here (HF_HUB_OFFLINE, the hub not answering within
    :data:`HUB_SECONDS`), or None: it is cached, the hub answers, or a proxy is in the way (the
    library tries)."""
    try:
        from huggingface_hub import constants, try_to_load_from_cache

        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return None
    except Exception:  # not a valid hub name: the library says so
        return None
    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    if any(os.environ.get(key) for key in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    hub = urlsplit(constants.ENDPOINT)
    try:
        socket.create_connection((hub.hostname, hub.port or (443 if hub.scheme == "https" else 80)),
                                 timeout=HUB_SECONDS).close()
    except OSError as err:
        return f"the hub ({constants.ENDPOINT}) cannot be reached ({err.strerror or err})"
    return None


def word_pieces(tokenizer, words: Sequence[str]) -> torch.Tensor:
    """Each word's subword ids ``[V, P]`` (-1 after the last): ``<pad>`` none, ``<unk>`` the
    tokenizer's unknown token, ``[SEP]`` its separator, every other word as the tokenizer splits it."""
    special = {PAD: [], UNK: [tokenizer.unk_token_id], SEP: [tokenizer.sep_token_id or tokenizer.unk_token_id]}
    plain = [w for w in words if w not in special]
    found = dict(zip(plain, tokenizer(plain, add_special_tokens=False)["input_ids"])) if plain else {}
    rows = [(special[w] if w in special else found[w] or [tokenizer.unk_token_id])[:MAX_PIECES] for w in words]
    table = torch.full((len(words), max(map(len, rows), default=1) or 1), -1, dtype=torch.long)
    for i, row in enumerate(rows):
        table[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return table


def specials(tokenizer) -> tuple[list[int], list[int]]:
    """The special ids the tokenizer puts before and after a text ([CLS] and [SEP] for BERT)."""
    body = tokenizer("a", add_special_tokens=False)["input_ids"]
    whole = tokenizer("a")["input_ids"]
    cut = next((i for i in range(len(whole) - len(body) + 1) if whole[i:i + len(body)] == body), len(whole))
    return whole[:cut], whole[cut + len(body):]


def load_pretrained(source: str | Path, words: Sequence[str], *, weights: bool = True,
                    flag: str = "--pretrained") -> Pretrained:
    """The transformer in ``source`` (a folder or hub name) for the vocabulary ``words``:
    its pretrained weights, or (``weights=False``: a run's, whose weights are in its
    ``model.safetensors``) its configuration alone, without the pooling layer of BERT-like
    models (unused: every parameter gets a gradient), in single precision whatever precision its
    checkpoint or configuration names (the toolkit trains in float32); one error line naming ``flag``
    when it cannot be read."""
    AutoConfig, AutoModel, AutoTokenizer = auto_classes()
    source = str(source)
    check_source(source)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModel.from_pretrained(source, dtype=torch.float32) if weights else AutoModel.from_config(
            AutoConfig.from_pretrained(source), dtype=torch.float32)
    except (OSError, ValueError, KeyError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"{flag} {source}: not a transformer with a tokenizer ({first})") from None
    if getattr(model, "pooler", None) is not None:  # BERT's pooler: the encoder reads the states, not it
        model.pooler = None
    prefix, suffix = specials(tokenizer)
    limits = [n for n in (getattr(model.config, "max_position_embeddings", None), tokenizer.model_max_length)
              if isinstance(n, int) and 0 < n < 1_000_000]
    return Pretrained(model, word_pieces(tokenizer, words), prefix, suffix, min(limits, default=512))


def save_transformer(source: str, out: Path) -> None:
    """The configuration and tokenizer files of ``source`` into the run directory ``out``."""
    AutoConfig, _, AutoTokenizer = auto_classes()
    target, partial = out / FOLDER, out / f".{FOLDER}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    AutoConfig.from_pretrained(source).save_pretrained(partial)
    AutoTokenizer.from_pretrained(source).save_pretrained(partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)  # whole or not at all


def run_transformer(run: Path, words: Sequence[str]) -> Pretrained:
    """The transformer of the run directory ``run`` (weights still to be loaded)."""
    if not (run / FOLDER / "config.json").is_file():
        raise UserError(f"{run}: no {FOLDER}/config.json; a run of an hf encoder keeps its transformer there")
    return load_pretrained(run / FOLDER, words, weights=False, flag="run transformer")
