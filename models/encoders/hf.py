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
  subwords' states for a tokenizer without one; an empty rationale reads the specials alone
  (without specials: one padding position, attended by nothing, and a zero summary), in one row
  or in a whole batch;
- a text of more subwords than the model has positions (``max_length``, specials included) is
  read in overlapping windows that fill them, each starting half a window after the last and
  each between the specials with positions 0, 1, ...; a subword's state is taken from the
  window whose middle is nearest to it (so it sees about a quarter window of context on each
  side, but at the text's ends), and the summary is the mean of the windows' summaries.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rationale_cli.models.encoders.base import Encoder


@dataclass
class Pretrained:
    """What a transformer encoder is built from: ``model``, a ``transformers`` model (each
    encoder takes its own copy), ``pieces [V, P]``, the subword ids of each vocabulary word
    (-1 after its last), the special ids the tokenizer puts before (``prefix``) and after
    (``suffix``) a text, and ``max_length``, the most subwords the model reads at once (a window)."""

    model: nn.Module
    pieces: Tensor
    prefix: list[int]
    suffix: list[int]
    max_length: int


@dataclass
class Subwords:
    """A gated batch of words as the transformer reads it, in windows ``[N, L]`` (one per text
    that fits the model's positions): ``ids``, ``scale`` (each subword's word gate, 1 for the
    specials) and ``attention``, ``word``, the word whose state each subword gives (-1 for the
    specials, the padding, and a subword that another window gives), and ``row [N]``, the text
    of each window."""

    ids: Tensor
    scale: Tensor
    attention: Tensor
    word: Tensor
    row: Tensor


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
        """The subwords of the words with ``gate > 0``, in order, between the specials: in windows
        of the model's positions, each starting half a window after the last, for a long text."""
        pieces = self.pieces[ids]  # [R, T, P]
        R, T, P = pieces.shape
        device = ids.device
        keep = ((pieces >= 0) & (gate > 0).unsqueeze(-1)).flatten(1)
        counts = keep.sum(1)
        most = int(counts.max()) if R else 0
        order = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices[:, :most]  # kept pieces first
        kept_ids = pieces.flatten(1).gather(1, order)
        kept_scale = gate.repeat_interleave(P, 1).gather(1, order)
        kept_word = torch.arange(T, device=device).repeat_interleave(P).expand(R, -1).gather(1, order)
        room = self.max_length - len(self.prefix) - len(self.suffix)
        stride = max(room // 2, 1)
        windows = torch.where(counts > room, (counts - room + stride - 1) // stride + 1, 1)  # [R]
        row = torch.repeat_interleave(torch.arange(R, device=device), windows)  # [N]
        first = torch.cumsum(windows, 0) - windows
        number = torch.arange(len(row), device=device) - first[row]  # each window's place in its text
        start = number * stride  # its first piece
        body = min(most, room)
        piece = start.unsqueeze(1) + torch.arange(body, device=device)  # [N, body]
        inside = piece < counts[row].unsqueeze(1)
        piece = piece.clamp(max=max(most - 1, 0))
        at = (row.unsqueeze(1), piece)  # each window's pieces among its text's kept ones
        # a piece's state comes from the window whose middle is nearest (within the text's windows)
        nearest = torch.floor((piece - (room - 1) / 2) / stride + 0.5).long()  # w's middle: w stride + (room - 1) / 2
        own = nearest.clamp(min=0).minimum((windows[row] - 1).unsqueeze(1)) == number.unsqueeze(1)
        front, back = len(self.prefix), len(self.suffix)
        N, length = len(row), max(front + body + back, 1)  # a padding position where nothing at all is read
        out_ids = ids.new_full((N, length), self.pad)
        scale = gate.new_zeros(N, length)
        word = ids.new_full((N, length), -1)
        out_ids[:, :front] = torch.tensor(self.prefix, dtype=ids.dtype, device=device)
        scale[:, :front] = 1.0
        out_ids[:, front:front + body] = torch.where(inside, kept_ids[at], self.pad)
        scale[:, front:front + body] = torch.where(inside, kept_scale[at], 0.0)
        word[:, front:front + body] = torch.where(inside & own, kept_word[at], -1)
        read = inside.sum(1, keepdim=True)
        ends = front + read + torch.arange(back, device=device)  # [N, back]
        out_ids.scatter_(1, ends, torch.tensor(self.suffix, dtype=ids.dtype, device=device).expand(N, -1))
        scale.scatter_(1, ends, 1.0)
        attention = torch.arange(length, device=device) < front + read + back
        return Subwords(out_ids, scale, attention.long(), word, row)

    def hidden(self, read: Subwords) -> Tensor:
        """The transformer's last-layer states ``[N, L, H]`` of ``read``."""
        embedded = self.transformer.get_input_embeddings()(read.ids) * read.scale.unsqueeze(-1)
        return self.transformer(inputs_embeds=embedded, attention_mask=read.attention).last_hidden_state

    def forward(self, ids: Tensor, gate: Tensor) -> tuple[Tensor, Tensor]:
        R, T = ids.shape
        read = self.subwords(ids, gate)
        hidden = self.hidden(read)
        H = hidden.shape[-1]
        inside = read.word >= 0
        # the specials, the padding and the pieces other windows give pool into a dropped slot
        slot = (read.row.unsqueeze(1) * (T + 1) + torch.where(inside, read.word, T)).flatten()
        summed = hidden.new_zeros(R * (T + 1), H).index_add(0, slot, hidden.flatten(0, 1))
        counts = hidden.new_zeros(R * (T + 1)).index_add(0, slot, inside.flatten().to(hidden.dtype))
        states = (summed / counts.clamp(min=1).unsqueeze(-1)).view(R, T + 1, H)[:, :T]
        if self.prefix:
            summaries = hidden[:, 0]
        else:
            weights = read.attention.to(hidden.dtype).unsqueeze(-1)
            summaries = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)
        windows = torch.bincount(read.row, minlength=R).to(hidden.dtype).unsqueeze(-1)
        return states, hidden.new_zeros(R, H).index_add(0, read.row, summaries) / windows

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
        return f"{type(self.transformer).__name__}, windows of {self.max_length} subwords"


def layer_list(transformer: nn.Module) -> nn.ModuleList:
    """The transformer's layers, in order: its first list of modules as long as its configuration's
    ``num_hidden_layers`` (BERT's ``encoder.layer``, DistilBERT's ``transformer.layer``, ...)."""
    count = transformer.config.num_hidden_layers
    for module in transformer.modules():
        if isinstance(module, nn.ModuleList) and len(module) == count:
            return module
    raise ValueError(f"no list of {count} layers in {type(transformer).__name__}; freeze all of it (-1) or none")
