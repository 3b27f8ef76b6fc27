"""A pretrained transformer (Hugging Face ``transformers``) as the selector or predictor encoder.

Selection stays over the toolkit's words: each vocabulary word has its subword pieces, found
once by the tokenizer (:class:`Pretrained`, built outside ``models``), so a batch of word ids
becomes subword ids with no change to the data. The encoder reads word ids ``[B, T]`` in place
of embeddings (``reads_ids``) and a gate ``z [B, T]`` (the padding mask for the selector, the
rationale for the predictor):

- only the subwords of words with ``z > 0`` are read, moved to the front in order, between the
  tokenizer's special tokens ([CLS] ... [SEP] for BERT), with positions 0, 1, ... and an
  attention mask over them alone: for a hard (0/1) rationale the transformer reads exactly the
  selected words, as if they were the whole text, and the gaps are invisible (no position,
  no attention, no zero vector marks them);
- a kept word's subword embeddings (the input embedding, before positions are added) are
  scaled by its ``z``: a relaxed or marginalized rationale's fractional values scale what the
  predictor reads, while its zeros are left out as above;
- a word's state is the mean of its subwords' last-layer states (mean pooling); the summary is
  the first special token's state ([CLS], as BERT's classifiers use it), or the mean of the read
  subwords' states for a tokenizer without one;
- at most ``max_length`` subwords are read, specials included (the model's positions): the
  rest of a longer text is cut off with a warning, its words getting zero states.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from models.encoders.base import Encoder


@dataclass
class Pretrained:
    """What a transformer encoder is built from: ``model``, a ``transformers`` model (each
    encoder takes its own copy), ``pieces [V, P]``, the subword ids of each vocabulary word
    (-1 after its last), the special ids the tokenizer puts before (``prefix``) and after
    (``suffix``) a text, and ``max_length``, the most subwords the model reads."""

    model: nn.Module
    pieces: Tensor
    prefix: list[int]
    suffix: list[int]
    max_length: int


@dataclass
class Subwords:
    """A gated batch of words as the transformer reads it: ``ids``, ``scale`` (each subword's
    word gate, 1 for the specials) and ``attention`` ``[R, L]``, and ``word``, the word each
    subword belongs to (-1 for the specials and padding)."""

    ids: Tensor
    scale: Tensor
    attention: Tensor
    word: Tensor


class HFEncoder(Encoder):
    """``encoder(ids [B, T], z [B, T]) -> (states [B, T, H], summary [B, H])`` over a copy of
    ``pretrained.model``; ``H`` is the transformer's hidden size."""

    reads_ids = True

    def __init__(self, pretrained: Pretrained):
        super().__init__()
        self.transformer = copy.deepcopy(pretrained.model)
        self.register_buffer("pieces", pretrained.pieces.clone(), persistent=False)  # rebuilt from the tokenizer
        self.prefix, self.suffix = list(pretrained.prefix), list(pretrained.suffix)
        self.max_length = pretrained.max_length
        self.output_size = self.transformer.config.hidden_size
        self.dropout = nn.Dropout(0.0)  # the transformer has its own
        self.pad = self.transformer.config.pad_token_id or 0

    def subwords(self, ids: Tensor, gate: Tensor) -> Subwords:
        """The subwords of the words with ``gate > 0``, in order, between the specials."""
        pieces = self.pieces[ids]  # [R, T, P]
        R, T, P = pieces.shape
        keep = ((pieces >= 0) & (gate > 0).unsqueeze(-1)).flatten(1)
        room = self.max_length - len(self.prefix) - len(self.suffix)
        counts = keep.sum(1)
        most = int(counts.max()) if R else 0
        if most > room:
            # the same words for every text, so that Python shows it once, not once per length
            warnings.warn(f"a text longer than {room} subwords: the transformer reads the first {room} "
                          "(its positions), the rest is cut off", stacklevel=3)
        counts = counts.clamp(max=room)
        body = min(most, room)
        order = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices[:, :body]  # kept pieces first
        inside = torch.arange(body, device=ids.device) < counts.unsqueeze(1)
        words = torch.arange(T, device=ids.device).repeat_interleave(P).expand(R, -1)
        front, back = len(self.prefix), len(self.suffix)
        length = front + body + back
        out_ids = ids.new_full((R, length), self.pad)
        scale = gate.new_zeros(R, length)
        word = ids.new_full((R, length), -1)
        out_ids[:, :front] = torch.tensor(self.prefix, dtype=ids.dtype, device=ids.device)
        scale[:, :front] = 1.0
        out_ids[:, front:front + body] = torch.where(inside, pieces.flatten(1).gather(1, order), self.pad)
        scale[:, front:front + body] = torch.where(inside, gate.repeat_interleave(P, 1).gather(1, order), 0.0)
        word[:, front:front + body] = torch.where(inside, words.gather(1, order), -1)
        ends = front + counts.unsqueeze(1) + torch.arange(back, device=ids.device)  # [R, back]
        out_ids.scatter_(1, ends, torch.tensor(self.suffix, dtype=ids.dtype, device=ids.device).expand(R, -1))
        scale.scatter_(1, ends, 1.0)
        attention = torch.arange(length, device=ids.device) < (front + counts + back).unsqueeze(1)
        return Subwords(out_ids, scale, attention.long(), word)

    def hidden(self, read: Subwords) -> Tensor:
        """The transformer's last-layer states ``[R, L, H]`` of ``read``."""
        embedded = self.transformer.get_input_embeddings()(read.ids) * read.scale.unsqueeze(-1)
        return self.transformer(inputs_embeds=embedded, attention_mask=read.attention).last_hidden_state

    def forward(self, ids: Tensor, gate: Tensor) -> tuple[Tensor, Tensor]:
        R, T = ids.shape
        read = self.subwords(ids, gate)
        hidden = self.hidden(read)
        inside = read.word >= 0
        slot = torch.where(inside, read.word, T)  # the specials and padding pool into a dropped slot
        summed = hidden.new_zeros(R, T + 1, hidden.shape[-1]).scatter_add(1, slot.unsqueeze(-1).expand_as(hidden),
                                                                          hidden)
        counts = hidden.new_zeros(R, T + 1).scatter_add(1, slot, inside.to(hidden.dtype))
        states = (summed / counts.clamp(min=1).unsqueeze(-1))[:, :T]
        if self.prefix:
            summary = hidden[:, 0]
        else:
            weights = read.attention.to(hidden.dtype).unsqueeze(-1)
            summary = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)
        return states, summary

    def freeze(self, layers: int) -> None:
        """Keep the transformer's embeddings and its first ``layers`` layers fixed (the whole
        transformer for -1 or at least as many layers as it has; nothing for 0)."""
        if layers == 0:
            return
        blocks = layer_list(self.transformer)
        frozen = [self.transformer] if layers < 0 or layers >= len(blocks) else [
            getattr(self.transformer, "embeddings", self.transformer.get_input_embeddings()), *blocks[:layers]]
        for module in frozen:
            module.requires_grad_(False)

    def extra_repr(self) -> str:
        return f"{type(self.transformer).__name__}, at most {self.max_length} subwords"


def layer_list(transformer: nn.Module) -> nn.ModuleList:
    """The transformer's layers, in order: its first list of modules as long as its configuration's
    ``num_hidden_layers`` (BERT's ``encoder.layer``, DistilBERT's ``transformer.layer``, ...)."""
    count = transformer.config.num_hidden_layers
    for module in transformer.modules():
        if isinstance(module, nn.ModuleList) and len(module) == count:
            return module
    raise ValueError(f"no list of {count} layers in {type(transformer).__name__}; freeze all of it (-1) or none")
