"""Correlated k-subsets against brute-force enumeration (n <= 9, k <= 4, pairwise terms)."""

import itertools

import pytest
import torch

from models.distributions.chain_ksubset import ChainKSubset
from models.distributions.ksubset import KSubset


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
    dist = ChainKSubset(u, w, mask, k, method=method)
    log_z, mu, best = dist.log_partition(tau), dist.marginals(tau), dist.argmax()
    for row, n in enumerate(lengths):
        kk = min(k, n)
        exact_log_z, exact_mu, exact_best = enumerate_subsets(u[row], w[row], n, kk, tau)
        assert log_z[row].item() == pytest.approx(exact_log_z.item(), abs=1e-9)
        assert torch.allclose(mu[row, :n], exact_mu, atol=1e-9)
        assert torch.all(mu[row, n:] == 0) and torch.all(best[row, n:] == 0)
        assert torch.equal(best[row, :n], exact_best)


def test_without_pairwise_terms_it_is_the_plain_k_subset_distribution(method):
    u, w, mask, _ = batch(7)
    chain = ChainKSubset(u, torch.zeros_like(w), mask, 3, method=method)
    plain = KSubset(u, mask, 3, method=method)
    assert torch.allclose(chain.log_partition(), plain.natural_log_partition(), atol=1e-9)
    assert torch.allclose(chain.marginals(), plain.marginals(), atol=1e-9)
    assert torch.equal(chain.argmax(), plain.argmax())


def test_gradcheck_of_the_relaxation(method):
    u, w, mask, _ = batch(3)
    u = u[:, :6].clone().requires_grad_(True)
    w = w[:, :5].clone().requires_grad_(True)
    mask = mask[:, :6]
    assert torch.autograd.gradcheck(lambda a, b: ChainKSubset(a, b, mask, 2, method=method).marginals(0.5), (u, w), atol=1e-6)


def test_large_positive_coupling_makes_the_argmax_contiguous(method):
    u = torch.tensor([[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]])
    w = torch.full((1, 5), 3.0)
    z = ChainKSubset(u, w, torch.ones(1, 6), 3, method=method).argmax()
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
    mu = ChainKSubset(u, w, mask, 11, method=method).marginals(0.1)
    grad_u, grad_w = torch.autograd.grad((mu * torch.randn(6, 40)).sum(), (u, w))
    assert torch.isfinite(mu).all() and torch.isfinite(grad_u).all() and torch.isfinite(grad_w).all()
    assert torch.allclose(mu.sum(-1), torch.full((6,), 11.0), atol=1e-2)
