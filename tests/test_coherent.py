"""Coherent decoding (rationale_cli.models.coherent): the mask it places is the best of all masks with the
same count, scores kept minus the cost per transition, by brute force; long documents are
placed block by block, each block keeping its count."""

import itertools

import pytest
import torch

from rationale_cli.models import coherent
from rationale_cli.models.coherent import in_runs, in_sentences


def value(z, scores, length, cost):
    bounded = torch.cat([z.new_zeros(1), z[:length], z.new_zeros(1)])
    return float((z[:length] * scores[:length]).sum()) - cost * float((bounded[1:] - bounded[:-1]).abs().sum())


def best_value(count, scores, length, cost):
    best = None
    for chosen in itertools.combinations(range(length), count):
        z = torch.zeros(len(scores))
        z[list(chosen)] = 1.0
        best = max(best if best is not None else float("-inf"), value(z, scores, length, cost))
    return best


@pytest.mark.parametrize("seed", range(8))
def test_the_placed_mask_is_the_best_of_its_count(seed):
    torch.manual_seed(seed)
    z, scores, mask = (torch.rand(4, 9) < 0.4).float(), torch.rand(4, 9), torch.ones(4, 9)
    mask[1, 6:], mask[3] = 0, 0
    cost = float(torch.rand(())) * 0.8
    placed = in_runs(z * mask, scores, mask, cost)
    for row in range(4):
        length, count = int(mask[row].sum()), int((z[row] * mask[row]).sum())
        assert placed[row].sum() == count and placed[row, length:].sum() == 0
        if length:
            assert value(placed[row], scores[row], length, cost) == pytest.approx(best_value(count, scores[row], length, cost))


def test_long_documents_are_placed_block_by_block(monkeypatch):
    monkeypatch.setattr(coherent, "BLOCK", 8)
    monkeypatch.setattr(coherent, "CELLS", 200)  # a few rows per program
    torch.manual_seed(0)
    z, scores, mask = (torch.rand(3, 30) < 0.5).float(), torch.rand(3, 30), torch.ones(3, 30)
    mask[2, 13:] = 0
    z = z * mask
    placed = in_runs(z, scores, mask, 0.3)
    for start in range(0, 30, 8):  # each block keeps its own count, each placed at its best
        block = slice(start, start + 8)
        assert torch.equal(placed[:, block].sum(-1), z[:, block].sum(-1))
        for row in range(3):
            length = int(mask[row, block].sum())
            assert value(placed[row, block], scores[row, block], length, 0.3) == pytest.approx(
                best_value(int(z[row, block].sum()), scores[row, block], length, 0.3))


def test_a_large_cost_gives_one_run_and_none_the_top_scores():
    scores = torch.tensor([[0.9, 0.1, 0.8, 0.2, 0.7, 0.05, 0.0, 0.6]])
    z, mask = torch.tensor([[1.0, 0, 1, 0, 1, 0, 0, 0]]), torch.ones(1, 8)
    assert in_runs(z, scores, mask, 0.0).tolist() == [[1, 0, 1, 0, 1, 0, 0, 0]]
    assert in_runs(z, scores, mask, 5.0).tolist() == [[1, 1, 1, 0, 0, 0, 0, 0]]


@pytest.mark.parametrize("seed", range(6))
def test_sentences_hold_the_count_in_the_best_sentences_and_no_more_of_them(seed):
    """in_sentences takes whole sentences, each scoring at least as well on average as any it
    left, holding the decoded count, and dropping its worst one would fall short of it."""
    torch.manual_seed(seed)
    z, scores, mask = (torch.rand(5, 14) < 0.3).float(), torch.rand(5, 14), torch.ones(5, 14)
    mask[1, 9:], mask[4] = 0, 0
    ends = torch.rand(5, 14) < 0.3
    sentences = ends.long().cumsum(-1) - ends.long()  # a sentence ends at each True
    placed = in_sentences(z * mask, scores, mask, sentences)
    for row in range(5):
        real = mask[row] > 0
        count = int((z[row] * mask[row]).sum())
        groups = {int(s): (sentences[row] == s) & real for s in sentences[row][real].unique()}
        means = {s: float(scores[row][g].mean()) for s, g in groups.items()}
        taken = {s for s, g in groups.items() if placed[row][g].all()}
        assert all(placed[row][g].all() or not placed[row][g].any() for g in groups.values())  # whole sentences
        assert placed[row][~real].sum() == 0
        held = sum(int(groups[s].sum()) for s in taken)
        assert held >= count and (count > 0 or held == 0)
        if taken:
            assert min(means[s] for s in taken) >= max((means[s] for s in groups if s not in taken), default=-1)
            worst = min(taken, key=lambda s: (means[s], -s))
            assert held - int(groups[worst].sum()) < count


def test_sentences_are_the_data_s_or_end_at_final_punctuation():
    from rationale_cli.data.records import Record, punctuated_sentences

    tokens = 'he said " it works . " really ! ? yes and no'.split()
    assert punctuated_sentences(tokens) == [(0, 7), (7, 10), (10, 13)]  # a closing quote stays with its sentence
    assert punctuated_sentences([]) == [] and punctuated_sentences(["no", "end"]) == [(0, 2)]
    assert Record(id="a", tokens=tokens).sentence_spans() == punctuated_sentences(tokens)
    assert Record(id="a", tokens=tokens, sentences=[(0, 13)]).sentence_spans() == [(0, 13)]


def test_decoding_in_sentences_needs_them_and_excludes_a_transition_cost():
    from rationale_cli.models.decoding import Decoding

    with pytest.raises(ValueError, match="not both"):
        Decoding(sentences=True, coherence=0.5)
    assert Decoding(rate=0.2, sentences=True).to_json() == {"rate": "0.2", "sentences": True}
