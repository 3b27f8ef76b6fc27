"""Faithfulness against a model whose answer is known: it selects the word 'good' and its
predictor reads nothing else (logit 4 for POS when 'good' is read, 0 otherwise)."""

import math

import pytest
import torch

from rationale_cli.data.batching import SEP, make_batch
from rationale_cli.data.records import Record
from rationale_cli.data.vocab import Vocab
from rationale_cli.evaluation.faithfulness import faithfulness_summary, scored_documents, top_tokens, variants
from rationale_cli.runs.task import Classification

WORDS = ["the", "film", "is", "good", "bad", "dull", "what", "?"]
P_GOOD = math.exp(4) / (1 + math.exp(4))  # p(POS) with 'good' read


class OneWord(torch.nn.Module):
    def __init__(self, word: int):
        super().__init__()
        self.word = word

    def embedded(self, ids):
        return ids.float().unsqueeze(-1)

    def predict_masked(self, emb, mask, masks, ids=None):
        read = ((emb[..., 0] == self.word).float() * mask).unsqueeze(1) * masks
        hit = read.sum(-1).clamp(max=1)
        return torch.stack([torch.zeros_like(hit), 4 * hit], -1)

    def decode(self, ids, mask, visible=None, decoding=None):  # a rule, whatever the decoding
        selectable = mask if visible is None else mask - visible
        z = (ids == self.word).float() * selectable
        read = z if visible is None else z + visible
        return z, z, self.predict_masked(self.embedded(ids), mask, read.unsqueeze(1))[:, 0]


def setup():
    vocab = Vocab.build([WORDS + [SEP]])
    return OneWord(vocab.stoi["good"]), vocab, Classification(["NEG", "POS"])


def test_drops_of_a_model_that_reads_one_word():
    model, vocab, task = setup()
    records = [Record("a", "the film is good".split(), label="POS"),
               Record("b", "the film is bad and dull".split(), label="NEG")]
    pairs = list(scored_documents(model, vocab, task, records, batch_size=1))
    (a, extra_a), (b, extra_b) = pairs
    assert a.prediction == "POS" and a.class_scores["POS"] == pytest.approx(P_GOOD)
    assert a.spans == [(3, 4)] and b.spans == []
    assert a.comprehensiveness["POS"] == pytest.approx(0.5)  # 'good' removed
    assert a.sufficiency["POS"] == pytest.approx(P_GOOD)  # 'good' alone
    for row in a.thresholded:  # 'good' ranks first, so every bin holds it
        assert row["comprehensiveness_classification_scores"]["POS"] == pytest.approx(0.5)
        assert row["sufficiency_classification_scores"]["POS"] == pytest.approx(P_GOOD)
    # without 'good' the model is at 0.5/0.5 whatever is removed
    assert b.class_scores["NEG"] == pytest.approx(0.5) and b.comprehensiveness["NEG"] == pytest.approx(0.5)
    summary = faithfulness_summary(pairs)
    assert summary["comprehensiveness"] == pytest.approx((P_GOOD - 0.5) / 2)
    assert summary["sufficiency"] == pytest.approx(0.0)
    assert summary["comprehensiveness_aopc"] == pytest.approx((P_GOOD - 0.5) / 2)
    assert summary["sufficiency_aopc"] == pytest.approx(0.0, abs=1e-7)
    assert summary["predictor_on_rationale"] == pytest.approx(0.0)
    assert summary["predictor_on_complement"] == pytest.approx((P_GOOD - 0.5) / 2)


def test_a_query_is_read_but_never_selected():
    model, vocab, task = setup()
    record = Record("q", "the film is dull".split(), label="POS", query="is it good ?".split())
    batch = make_batch([record], vocab)
    assert batch.visible[0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1]  # [SEP] and the query after the document
    ((doc, extra),) = scored_documents(model, vocab, task, [record])
    assert doc.spans == [] and len(doc.soft) == 4
    assert doc.class_scores["POS"] == pytest.approx(P_GOOD)  # 'good' in the query is read
    assert extra["complement"]["POS"] == pytest.approx(P_GOOD)


def test_bins_and_altered_documents():
    assert top_tokens([0.1, 0.5, 0.5, 0.9], 3) == {3, 1, 2}
    assert top_tokens([0.5, 0.5, 0.5], 2) == {0, 1}  # ties: earlier first
    record = Record("a", list("abcdefghij"))
    out = variants(record, {0, 1}, [i / 10 for i in range(10)], [0.1, 0.5])
    assert [r.tokens for r in out[:2]] == [list("cdefghij"), list("ab")]
    assert out[2].tokens == list("abcdefghi") and out[3].tokens == ["j"]  # 1 token: ceil(0.1 * 10)
    assert out[5].tokens == list("fghij")
    assert variants(Record("b", ["x"]), {0}, [1.0], [])[0].tokens == ["<unk>"]  # nothing left
