"""A tiny BERT from random weights, with a WordPiece tokenizer trained on the demo's texts: the
stand-in for a downloaded transformer in the tests (``tests/test_hf.py``) and on the demo.

Two layers of width 32 (2 heads, 96 positions) and a vocabulary of 250 subwords, so that many
words split into several pieces; the weights come from ``torch.manual_seed(0)``. Saved as a
folder that ``--encoder hf --pretrained DIR`` reads:

    python benchmarks/tiny_bert.py DIR [--documents 2000]
    python benchmarks/demo_extractors.py --extractors hardkuma --epochs 150 -- --encoder hf --pretrained DIR \\
        --lr 0.001 --guidance 1
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=96)


def build_tiny_bert(folder, texts, vocab_size=250):
    """The tiny BERT and a WordPiece tokenizer trained on ``texts``, saved in ``folder``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL))
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                             special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = BertTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", sep_token="[SEP]", cls_token="[CLS]",
                             pad_token="[PAD]", mask_token="[MASK]", model_max_length=TINY["max_position_embeddings"])
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tokenizer.get_vocab_size(), pad_token_id=0, **TINY)).save_pretrained(folder)
    return folder


def main() -> None:
    from rationale_cli.data import sources

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the folder to write")
    parser.add_argument("--documents", type=int, default=2000, help="the tokenizer learns the first N training texts")
    args = parser.parse_args()
    texts = [" ".join(record.tokens) for record in sources.load("demo", "train")[: args.documents]]
    print(build_tiny_bert(args.out, texts))


if __name__ == "__main__":
    main()
