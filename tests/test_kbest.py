"""The K best masks under a budget (the K-max reduction of the chain program) against
brute force (n <= 10), and top-k sparsemax."""

import itertools

import pytest
import torch

from rationale_cli.models.distributions.chain_ksubset import ChainKSubset
from rationale_cli.models.distributions.subset_tree import NEG
from rationale_cli.models.native.kbest import kmax_merge
from rationale_cli.models.selectors.marginalization.topk_sparsemax import TopKSparsemaxSelector


def all_scores(theta, n, budget):
    return sorted(((theta[:n] * torch.tensor(bits, dtype=theta.dtype)).sum().item()
                   for bits in itertools.product([0, 1], repeat=n) if sum(bits) <= budget), reverse=True)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])  # float32: the compiled merge
@pytest.mark.parametrize("k", [1, 3, 8, 40])
def test_k_best_masks_match_enumeration(k, dtype):
    torch.manual_seed(k)
    theta = torch.randn(4, 10, dtype=dtype)
    mask = torch.zeros(4, 10, dtype=dtype)
    lengths, budgets = [10, 7, 3, 9], torch.tensor([3, 2, 3, 9])
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    masks, scores = ChainKSubset(theta, mask, budgets, at_most=True).topk(k)
    for row, n in enumerate(lengths):
        exact = all_scores(theta[row], n, int(budgets[row]))
        found = scores[row][scores[row] > NEG / 2].tolist()
        assert found == pytest.approx(exact[:k], abs=1e-9 if dtype == torch.float64 else 1e-5)  # best first
        real = masks[row, : len(found)]
        assert torch.allclose((real * theta[row]).sum(-1), scores[row, : len(found)], atol=1e-5)
        assert torch.all(real.sum(-1) <= budgets[row]) and torch.all(masks[row, :, n:] == 0)
        assert len({tuple(m.tolist()) for m in real}) == len(found)  # distinct masks


def test_compiled_k_best_merge_gives_what_topk_gives():
    """Two lists per state, each sorted best first, merged into a strided slice of a table:
    the values of ``cat([a, b]).topk(R)``, each pointer at an equal value, ties to the first
    list; impossible states (NEG) included."""
    torch.manual_seed(0)
    a = torch.randn(5, 7, 4).sort(-1, descending=True).values
    b = torch.randn(5, 7, 4).sort(-1, descending=True).values
    b[0] = a[0]  # ties between the lists
    a[1, :, 2:] = NEG
    b[1, :, 1:] = NEG
    table = torch.zeros(5, 2, 7, 4)
    pointer = kmax_merge(a, b + 0.0, table[:, 1])
    values, _ = torch.cat([a, b], -1).topk(4, -1)
    assert pointer is not None and torch.equal(table[:, 1], values) and not table[:, 0].any()
    assert torch.equal(torch.cat([a, b], -1).gather(-1, pointer), values)
    assert bool((pointer[0] == torch.tensor([0, 4, 1, 5])).all())  # a's first on ties


def test_top_k_sparsemax_weights_and_certificate():
    torch.manual_seed(0)
    selector = TopKSparsemaxSelector(4, budget=0.3, top_masks=5).double()
    states = torch.randn(3, 8, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(3, 8, dtype=torch.float64)
    mask[2, 5:] = 0
    selection = selector(states, mask)
    assert torch.allclose(selection.weights.sum(-1), torch.ones(3, dtype=torch.float64))
    assert torch.all(selection.masks.sum(-1) <= 2) and torch.all(selection.masks[2, :, 5:] == 0)
    assert 1 <= selection.stats["support"] <= 5 and 0 <= selection.stats["exact"] <= 1
    (selection.weights * torch.arange(5.0, dtype=torch.float64)).sum().backward()
    assert torch.isfinite(states.grad).all() and states.grad.abs().sum() > 0
    z, scores = selector.decode_with_scores(states, mask)
    assert torch.equal(z, selection.masks[:, 0]) and torch.all(scores <= 1 + 1e-9)


@pytest.mark.parametrize("pairwise,coherence", [(True, None), (False, 0.7), (True, 0.7)])
def test_top_k_sparsemax_ranks_masks_by_their_pair_scores_and_transition_cost(pairwise, coherence):
    """With ``pairwise`` a mask scores <theta, z> + sum_i w_i z_i z_{i+1}, and ``coherence``
    subtracts lambda per 0/1 transition between adjacent real tokens: the support is the
    K best masks by that score (enumerated), weighted by sparsemax of it, and the
    coherence layer, which starts at zero, gets a gradient."""
    from entmax import sparsemax

    torch.manual_seed(4)
    selector = TopKSparsemaxSelector(4, budget=0.5, top_masks=6, pairwise=pairwise, coherence=coherence).double()
    if pairwise:
        assert torch.all(selector.pair.weight == 0) and torch.all(selector.pair.bias == 0)
        torch.nn.init.normal_(selector.pair.weight)
    states = torch.randn(2, 7, 4, dtype=torch.float64)
    mask = torch.ones(2, 7, dtype=torch.float64)
    mask[1, 5:] = 0
    selection = selector(states, mask)
    assert torch.all((selection.weights > 0).sum(-1) > 1)  # a mixture: the weights have a gradient
    theta = selector.score(states).squeeze(-1).detach()
    w = selector.pair(torch.cat([states[:, :-1], states[:, 1:]], -1)).squeeze(-1).detach() if pairwise else None

    def score(z, row, n):
        total = (theta[row, :n] * z[:n]).sum()
        if pairwise:
            total = total + (w[row, : n - 1] * z[1:n] * z[: n - 1]).sum()
        return total - (coherence or 0) * (z[1:n] - z[: n - 1]).abs().sum()

    for row, n in enumerate([7, 5]):
        budget = int(selector.budgets(mask)[row])
        scored = sorted((score(torch.tensor(bits + (0,) * (7 - n), dtype=torch.float64), row, n).item()
                         for bits in itertools.product([0, 1], repeat=n) if sum(bits) <= budget), reverse=True)
        found = [score(z, row, n).item() for z in selection.masks[row]]
        assert found == pytest.approx(scored[:6], abs=1e-9)
        expected = sparsemax(torch.tensor(scored[:6], dtype=torch.float64), dim=-1)
        assert torch.allclose(selection.weights[row].detach(), expected, atol=1e-9)
    if pairwise:
        (selection.weights * torch.arange(6.0, dtype=torch.float64)).sum().backward()
        assert selector.pair.weight.grad.abs().sum() > 0
