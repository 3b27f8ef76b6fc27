"""Correlated k-subsets against brute-force enumeration (n <= 9, k <= 4, pairwise terms)."""

import itertools

import pytest
import torch

from rationale_cli.models.distributions import chain_dp
from rationale_cli.models.distributions.chain_ksubset import ChainKSubset
from rationale_cli.models.distributions.ksubset import KSubset


def enumerate_subsets(u, w, n, k, tau=1.0):
    scores = {}
    for bits in itertools.product([0, 1], repeat=n):
        if sum(bits) != k:
            continue
        z = torch.tensor(bits, dtype=u.dtype)
        scores[bits] = (u[:n] * z).sum() + (w[: n - 1] * z[1:] * z[:-1]).sum()
    stacked = torch.stack(list(scores.values())) / tau
    log_z = torch.logsumexp(stacked, 0)
    probs = torch.exp(stacked - log_z)
    subsets = torch.tensor(list(scores), dtype=u.dtype)
    best = subsets[int(torch.argmax(stacked))]
    return log_z, (probs.unsqueeze(-1) * subsets).sum(0), best


def batch(seed=0):
    torch.manual_seed(seed)
    lengths = [9, 6, 3, 8]
    u = torch.randn(4, 9, dtype=torch.float64) * 2
    w = torch.randn(4, 8, dtype=torch.float64) * 2
    mask = torch.zeros(4, 9, dtype=torch.float64)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return u, w, mask, lengths


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_log_partition_marginals_and_argmax_match_enumeration(k, tau, method):
    u, w, mask, lengths = batch(k)
    dist = ChainKSubset(u / tau, mask, k, w / tau, method=method)
    log_z, mu, best = dist.log_partition, dist.marginals, dist.argmax
    for row, n in enumerate(lengths):
        kk = min(k, n)
        exact_log_z, exact_mu, exact_best = enumerate_subsets(u[row], w[row], n, kk, tau)
        assert log_z[row].item() == pytest.approx(exact_log_z.item(), abs=1e-9)
        assert torch.allclose(mu[row, :n], exact_mu, atol=1e-9)
        assert torch.all(mu[row, n:] == 0) and torch.all(best[row, n:] == 0)
        assert torch.equal(best[row, :n], exact_best)


def test_without_pairwise_terms_it_is_the_plain_k_subset_distribution(method):
    u, w, mask, _ = batch(7)
    chain = ChainKSubset(u, mask, 3, torch.zeros_like(w), method=method)
    plain = KSubset(u, mask, 3, method=method)
    assert torch.allclose(chain.log_partition, plain.log_partition, atol=1e-9)
    assert torch.allclose(chain.marginals, plain.marginals, atol=1e-9)
    assert torch.equal(chain.argmax, plain.argmax)


def test_gradcheck_of_the_relaxation(method):
    u, w, mask, _ = batch(3)
    u = u[:, :6].clone().requires_grad_(True)
    w = w[:, :5].clone().requires_grad_(True)
    mask = mask[:, :6]
    assert torch.autograd.gradcheck(lambda a, b: ChainKSubset(a / 0.5, mask, 2, b / 0.5, method=method).marginals,
                                    (u, w), atol=1e-6)


def test_large_positive_coupling_makes_the_argmax_contiguous(method):
    u = torch.tensor([[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]])
    w = torch.full((1, 5), 3.0)
    z = ChainKSubset(u, torch.ones(1, 6), 3, w, method=method).argmax
    assert z.sum() == 3
    ones = z[0].nonzero().flatten().tolist()
    assert ones == list(range(ones[0], ones[0] + 3))


def test_large_utilities_give_finite_gradients_in_float32(method):
    """Low temperatures scale utilities up (here |u| / tau ~ 300, log-weights ~ 1e4);
    impossible states must not overflow the backward recurrences (0 * inf would be NaN).
    float32 spacing at 1e4 is 1e-3, so the marginals sum to k within 1e-2."""
    torch.manual_seed(0)
    u = (torch.randn(6, 40) * 30).requires_grad_(True)
    w = (torch.randn(6, 39) * 30).requires_grad_(True)
    mask = torch.ones(6, 40)
    mask[3:, 25:] = 0
    mu = ChainKSubset(u / 0.1, mask, 11, w / 0.1, method=method).marginals
    grad_u, grad_w = torch.autograd.grad((mu * torch.randn(6, 40)).sum(), (u, w))
    assert torch.isfinite(mu).all() and torch.isfinite(grad_u).all() and torch.isfinite(grad_w).all()
    assert torch.allclose(mu.sum(-1), torch.full((6,), 11.0), atol=1e-2)


def all_masks(u, w, n, k, at_most):
    """Every allowed mask of the first n tokens ``[M, n]`` and its score ``[M]``."""
    masks = torch.tensor([bits for bits in itertools.product([0, 1], repeat=n)
                          if (sum(bits) <= k if at_most else sum(bits) == k)], dtype=u.dtype)
    pairs = w[: n - 1] if w is not None else torch.zeros(n - 1, dtype=u.dtype)
    scores = masks @ u[:n] + (masks[:, 1:] * masks[:, :-1]) @ pairs
    return masks, scores


@pytest.mark.parametrize("pairwise", [False, True])
@pytest.mark.parametrize("at_most", [False, True])
def test_every_quantity_of_the_protocol_matches_enumeration(pairwise, at_most, method):
    """log-partition, marginals, entropy, log-probabilities, argmax and the K best masks,
    exactly k or at most k, with and without pairwise terms, on a padded batch with each
    row's own k."""
    u, w, mask, lengths = batch(11)
    w = w if pairwise else None
    k = torch.tensor([3, 2, 4, 1])
    dist = ChainKSubset(u, mask, k, w, at_most=at_most, method=method)
    masks_k, scores_k = dist.topk(5)
    for row, n in enumerate(lengths):
        masks, scores = all_masks(u[row], None if w is None else w[row], n, min(int(k[row]), n), at_most)
        probs = torch.softmax(scores, 0)
        assert dist.log_partition[row].item() == pytest.approx(torch.logsumexp(scores, 0).item(), abs=1e-9)
        assert torch.allclose(dist.marginals[row, :n], probs @ masks, atol=1e-9)
        assert dist.entropy[row].item() == pytest.approx(-(probs * probs.log()).sum().item(), abs=1e-9)
        assert torch.equal(dist.argmax[row, :n], masks[scores.argmax()])
        z = torch.zeros(len(masks), 9, dtype=u.dtype)
        z[:, :n] = masks
        log_p = ChainKSubset(u[row].expand(len(masks), 9), mask[row].expand(len(masks), 9), int(k[row]),
                             None if w is None else w[row].expand(len(masks), 8), at_most=at_most).log_prob(z)
        assert torch.allclose(log_p, probs.log(), atol=1e-9)
        ranked = scores.sort(descending=True).values[:5]
        assert torch.allclose(scores_k[row, : len(ranked)], ranked, atol=1e-9)
        found = masks_k[row, : len(ranked), :n]
        found_scores = found @ u[row, :n] + (0 if w is None else (found[:, 1:] * found[:, :-1]) @ w[row, : n - 1])
        assert torch.allclose(found_scores, ranked, atol=1e-9)  # the masks carry those scores
        assert len({tuple(m.tolist()) for m in found}) == len(ranked)
        assert torch.all(masks_k[row, :, n:] == 0) and torch.all(dist.marginals[row, n:] == 0)


def test_a_draw_of_exactly_zero_takes_no_impossible_state():
    """The walk takes a bit where the draw is below its probability: a draw of 0 (float32's
    rand gives it once in 2^24) never takes a state of probability 0 (the count must come out
    exact, padding never selected)."""
    torch.manual_seed(0)
    u, w = torch.randn(3, 7), torch.randn(3, 6)
    mask = torch.ones(3, 7)
    mask[2, 4:] = 0
    dist = ChainKSubset(u, mask, 2, w, method="sequential")
    alpha = chain_dp.forward_table(*[x.t().contiguous() for x in dist.program_inputs()], dist.max_k)[0]
    z = chain_dp.walk_back(alpha, *[x.t().contiguous() for x in dist.program_inputs()], dist.ends,
                           torch.zeros(8, 3)).t()
    assert z.sum(-1).tolist() == [2, 2, 2] and not z[2, 4:].any()


@pytest.mark.parametrize("pairwise,at_most", [(True, False), (False, True), (True, True)])
def test_samples_with_pairwise_terms_or_a_cap_follow_the_exact_distribution(pairwise, at_most, method):
    torch.manual_seed(4)
    n, draws = 5, 30_000
    u = torch.randn(1, n, dtype=torch.float64)
    w = torch.randn(1, n - 1, dtype=torch.float64) * 1.5 if pairwise else None
    dist = ChainKSubset(u.expand(draws, n), torch.ones(draws, n, dtype=torch.float64), 2,
                        None if w is None else w.expand(draws, n - 1), at_most=at_most, method=method)
    z = dist.sample(torch.Generator().manual_seed(0))
    masks, scores = all_masks(u[0], None if w is None else w[0], n, 2, at_most)
    probs = torch.softmax(scores, 0)
    counts = (z.unsqueeze(1) == masks.unsqueeze(0)).all(-1).sum(0).double()
    assert counts.sum() == draws  # every sample is an allowed mask
    chi2 = ((counts - draws * probs) ** 2 / (draws * probs)).sum().item()
    # 10 or 16 masks: 9 or 15 degrees of freedom, 99.9% quantiles 27.9 and 37.7
    assert chi2 < (27.9 if len(masks) == 10 else 37.7), chi2


def test_one_sequential_pass_gives_the_sample_marginals_and_log_partition(monkeypatch):
    from rationale_cli.models.distributions import chain_dp

    calls = []
    original = chain_dp.ChainMarginals.apply
    monkeypatch.setattr(chain_dp.ChainMarginals, "apply", lambda *a: calls.append(1) or original(*a))
    u, _, mask, _ = batch(2)
    dist = KSubset(u.requires_grad_(True), mask, 3, method="sequential")
    z = dist.sample()
    mu, entropy, kl = dist.marginals, dist.entropy, dist.kl_uniform()
    assert len(calls) == 1 and dist.marginals is mu
    assert torch.allclose(z.sum(-1), mu.sum(-1)) and torch.isfinite(entropy + kl).all()
    (grad,) = torch.autograd.grad(kl.sum() + mu[:, 0].sum(), u)
    assert torch.isfinite(grad).all()
    assert not torch.equal(dist.sample(), z) or not torch.equal(dist.sample(), z)  # later samples are new draws


def test_gradcheck_of_the_capped_marginals(method):
    u, w, mask, _ = batch(5)
    u = u[:, :6].clone().requires_grad_(True)
    w = w[:, :5].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: ChainKSubset(a, mask[:, :6], 3, b, at_most=True,
                                                              method=method).marginals,
                                    (u, w), atol=1e-6)
