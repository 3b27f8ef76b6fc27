"""The k-subset distribution against brute-force enumeration (n <= 10), sampling
frequencies, gradcheck of the SIMPLE estimator path, and numerical traps."""

import itertools
import math

import pytest
import torch

from rationale_cli.models.distributions.ksubset import KSubset, simple_estimator


def brute_force(logits, n, k):
    """Exact log P(sum = k), conditional marginals, entropy and the distribution over subsets."""
    p = torch.sigmoid(logits[:n])
    probs = {}
    for bits in itertools.product([0, 1], repeat=n):
        if sum(bits) != k:
            continue
        z = torch.tensor(bits, dtype=logits.dtype)
        probs[bits] = torch.prod(torch.where(z > 0, p, 1 - p))
    total = sum(probs.values())
    marginals = sum(torch.tensor(bits, dtype=logits.dtype) * q for bits, q in probs.items()) / total
    entropy = -sum((q / total) * torch.log(q / total) for q in probs.values())
    return torch.log(total), marginals, entropy, {bits: float(q / total) for bits, q in probs.items()}


def padded_batch():
    torch.manual_seed(0)
    lengths = [10, 7, 4, 9]
    logits = torch.randn(4, 10, dtype=torch.float64) * 2
    mask = torch.zeros(4, 10, dtype=torch.float64)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    logits = logits.masked_fill(mask == 0, -1e4)  # extreme padding values must not matter
    return logits, mask, lengths


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_log_partition_marginals_and_entropy_match_enumeration(k, method):
    logits, mask, lengths = padded_batch()
    dist = KSubset(logits, mask, k, method=method)
    log_z = dist.log_count_probability
    mu = dist.marginals
    entropy = dist.entropy
    for row, n in enumerate(lengths):
        kk = min(k, n)
        exact_log_z, exact_mu, exact_h, _ = brute_force(logits[row], n, kk)
        assert log_z[row].item() == pytest.approx(float(exact_log_z), abs=1e-9)
        assert torch.allclose(mu[row, :n], exact_mu, atol=1e-9)
        assert torch.all(mu[row, n:] == 0)
        assert mu[row].sum().item() == pytest.approx(kk, abs=1e-9)
        assert entropy[row].item() == pytest.approx(float(exact_h), abs=1e-9)
        log_choose = math.lgamma(n + 1) - math.lgamma(kk + 1) - math.lgamma(n - kk + 1)
        assert dist.kl_uniform()[row].item() == pytest.approx(log_choose - float(exact_h), abs=1e-9)


def test_k_larger_than_a_document_selects_the_whole_document(method):
    logits, mask, lengths = padded_batch()
    dist = KSubset(logits, mask, 8, method=method)
    z = dist.sample()
    assert z[2].tolist() == mask[2].tolist()  # 4 tokens < k = 8: all of them
    assert torch.equal(dist.argmax[2], mask[2])
    assert torch.allclose(dist.marginals[2], mask[2])
    assert torch.allclose(z.sum(-1), torch.tensor([8.0, 7, 4, 8], dtype=z.dtype))


def test_samples_follow_the_exact_distribution(method):
    torch.manual_seed(3)
    logits = torch.randn(1, 6, dtype=torch.float64)
    mask = torch.ones(1, 6, dtype=torch.float64)
    k, draws = 2, 40_000
    dist = KSubset(logits.expand(draws, 6), mask.expand(draws, 6), k, method=method)
    z = dist.sample(torch.Generator().manual_seed(0))
    assert torch.all(z.sum(-1) == k)
    _, _, _, exact = brute_force(logits[0], 6, k)
    counts = {}
    for row in z.long().tolist():
        counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    chi2 = sum((counts.get(bits, 0) - draws * q) ** 2 / (draws * q) for bits, q in exact.items())
    # 15 subsets -> 14 degrees of freedom; the 99.9% quantile is 36.1
    assert chi2 < 36.1, chi2


def test_argmax_is_exactly_k_with_deterministic_ties(method):
    logits = torch.tensor([[0.5, 0.5, 0.5, 2.0, 0.5]])
    mask = torch.tensor([[1.0, 1, 1, 1, 0]])
    assert KSubset(logits, mask, 2, method=method).argmax.tolist() == [[1.0, 0, 0, 1, 0]]


def test_gradcheck_of_the_estimator_backward(method):
    """The estimator's backward is J_mu^T g: check the marginals' Jacobian (second
    derivatives of the DP) in float64 on a padded batch."""
    logits, mask, _ = padded_batch()
    logits = logits[:, :7].clone().requires_grad_(True)
    mask = mask[:, :7]
    assert torch.autograd.gradcheck(lambda t: KSubset(t, mask, 3, method=method).marginals, (logits,), atol=1e-6)


def test_estimator_backward_is_covariance_times_the_downstream_gradient(method):
    torch.manual_seed(5)
    n, k = 7, 3
    logits = torch.randn(1, n, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(1, n, dtype=torch.float64)
    g = torch.randn(1, n, dtype=torch.float64)
    z, _ = simple_estimator(KSubset(logits, mask, k, method=method))
    assert torch.all((z == 0) | (z == 1)) and z.sum().item() == k
    (grad,) = torch.autograd.grad((z * g).sum(), logits)
    # exact: Cov(z | sum = k) g, by enumeration
    _, _, _, exact = brute_force(logits[0].detach(), n, k)
    mean = sum(torch.tensor(b, dtype=torch.float64) * q for b, q in exact.items())
    cov = sum(q * torch.outer(torch.tensor(b, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))
              for b, q in exact.items()) - torch.outer(mean, mean)
    assert torch.allclose(grad[0], cov @ g[0], atol=1e-9)


def test_extreme_logits_and_padding_give_finite_second_order_gradients_in_float32(method):
    logits = torch.tensor([[60.0, -60.0, 0.3, 90.0, -1e4, -1e4], [-95.0, 2.0, 80.0, -3.0, 1.0, -1e4]],
                          requires_grad=True)
    mask = torch.tensor([[1.0, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]])
    z, mu = simple_estimator(KSubset(logits, mask, 2, method=method))
    (grad,) = torch.autograd.grad((z * torch.randn(2, 6)).sum(), logits)
    assert torch.isfinite(mu).all() and torch.isfinite(grad).all()
    assert torch.all(grad[mask == 0] == 0)


def test_marginals_work_without_grad_mode(method):
    logits, mask, _ = padded_batch()
    with torch.no_grad():
        mu = KSubset(logits, mask, 3, method=method).marginals
    assert not mu.requires_grad and torch.allclose(mu.sum(-1), torch.full((4,), 3.0, dtype=mu.dtype))
