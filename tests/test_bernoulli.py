"""Bernoulli/REINFORCE: the surrogate's gradient is the exact gradient of the expected
cost (enumerated), with and without baselines; padding never counts."""

import itertools
import math

import pytest
import torch

from rationale_cli.models.selectors.binary.bernoulli import (
    BernoulliSelector,
    counts,
    expected_counts,
    log_prob,
    prefix_counts,
    straight_through,
)

N = 6
X = torch.linspace(-1.0, 1.0, N, dtype=torch.float64)


def task_cost(z):
    """A deterministic stand-in for the predictor's loss of a mask."""
    weights = torch.tensor([0.9, -0.4, 0.7, 0.2, -0.8, 0.5], dtype=torch.float64)
    return ((z * weights).sum(-1) - 0.6) ** 2


def make_selector(baseline, samples, **options):
    torch.manual_seed(0)
    selector = BernoulliSelector(1, baseline=baseline, samples=samples, sparsity=0.05, coherence=0.03,
                                 lagrangian=False, **options)
    selector.double()
    with torch.no_grad():
        selector.logit_layer.weight.fill_(0.8)
        selector.logit_layer.bias.fill_(-0.3)
    return selector


def exact_gradient(selector):
    params = list(selector.logit_layer.parameters())
    logits = selector.logit_layer(X.view(1, N, 1)).squeeze(-1)[0]
    total = torch.zeros((), dtype=torch.float64)
    mask = torch.ones(N, dtype=torch.float64)
    for bits in itertools.product([0.0, 1.0], repeat=N):
        z = torch.tensor(bits, dtype=torch.float64)
        selected, transitions = counts(z, mask)
        cost = task_cost(z) + selector.sparsity * selected + selector.coherence * transitions
        total = total + torch.exp(log_prob(logits, z, mask)) * cost
    return torch.autograd.grad(total, params)


@pytest.mark.parametrize("exact_penalty", [True, False])
@pytest.mark.parametrize("baseline", ["none", "ema", "loo"])
def test_surrogate_gradient_matches_the_exact_gradient(baseline, exact_penalty):
    """Sampled penalties (Lei et al.) or their exact expectations: the same expected gradient."""
    samples = 40_000
    selector = make_selector(baseline, samples, exact_penalty=exact_penalty)
    states, mask = X.view(1, N, 1), torch.ones(1, N, dtype=torch.float64)
    torch.manual_seed(1)
    if baseline == "ema":  # one training step sets the moving average
        first = selector(states, mask)
        first.surrogate(task_cost(first.masks))
    selection = selector(states, mask)
    surrogate = selection.surrogate(task_cost(selection.masks)) + selection.penalty
    estimate = torch.autograd.grad(surrogate, list(selector.logit_layer.parameters()))
    exact = exact_gradient(selector)
    # per-sample score-function terms (without baseline: an upper bound on the
    # estimator's spread when a baseline is used) give the Monte Carlo standard error
    z = selection.masks[0]
    p = torch.sigmoid(selector.logit_layer(states).squeeze(-1))[0].detach()
    selected, transitions = counts(z, torch.ones(N, dtype=torch.float64))
    cost = task_cost(z) + selector.sparsity * selected + selector.coherence * transitions
    per_sample = cost.unsqueeze(-1) * torch.stack([((z - p) * X).sum(-1), (z - p).sum(-1)], -1)
    se = per_sample.std(0) / math.sqrt(samples)
    for got, want, err in zip(estimate, exact, se):
        assert torch.allclose(got.reshape(()), want.reshape(()), atol=4 * float(err)), (baseline, got, want, err)


def test_baselines_reduce_variance_on_a_fixed_problem():
    states, mask = X.view(1, N, 1), torch.ones(1, N, dtype=torch.float64)
    spreads = {}
    for baseline in ("none", "loo"):
        selector = make_selector(baseline, 8)
        grads = []
        torch.manual_seed(2)
        for _ in range(300):
            selection = selector(states, mask)
            surrogate = selection.surrogate(task_cost(selection.masks))
            grads.append(torch.autograd.grad(surrogate, [selector.logit_layer.weight])[0].item())
        spreads[baseline] = torch.tensor(grads).var().item()
    assert spreads["loo"] < spreads["none"]


def test_expected_counts_match_enumeration_with_padding():
    p = torch.tensor([0.2, 0.9, 0.5, 0.7, 0.3], dtype=torch.float64)
    mask = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    want = torch.zeros(2, dtype=torch.float64)
    for bits in itertools.product([0.0, 1.0], repeat=4):
        z = torch.tensor([*bits, 0.0], dtype=torch.float64)
        weight = torch.exp(log_prob(torch.logit(p), z, mask))
        want += weight * torch.stack(counts(z, mask))
    got = torch.stack(expected_counts(p, mask))
    assert torch.allclose(got, want, atol=1e-12), (got, want)


def test_padding_never_counts():
    z = torch.tensor([[1.0, 0.0, 1.0, 1.0, 1.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0]])
    selected, transitions = counts(z * mask, mask)
    assert selected.item() == 2 and transitions.item() == 2
    logits = torch.zeros(1, 5)
    assert log_prob(logits, z * mask, mask).item() == pytest.approx(3 * math.log(0.5))


@pytest.mark.parametrize("dependent", [False, True])
def test_decode_is_deterministic_and_padding_invariant(dependent):
    torch.manual_seed(0)
    selector = BernoulliSelector(4, dependent=dependent).eval()
    states = torch.randn(1, 5, 4)
    padded = torch.cat([states, torch.randn(1, 2, 4)], 1)
    mask, padded_mask = torch.ones(1, 5), torch.cat([torch.ones(1, 5), torch.zeros(1, 2)], 1)
    z = selector.decode(states, mask)
    assert torch.equal(z, selector.decode(padded, padded_mask)[:, :5])
    assert torch.equal(z, (selector.token_scores(states, mask) >= 0.5).float())
    selection = selector(padded, padded_mask)
    assert torch.all(selection.masks[..., 5:] == 0)


def test_leave_one_out_needs_several_samples():
    with pytest.raises(ValueError, match="samples"):
        BernoulliSelector(4, baseline="loo", samples=1)


@pytest.mark.slow
def test_lagrangian_rate_on_the_demo_corpus_is_precise_near_the_gold_share(tmp_path):
    """Precision above 85% at a selection rate within 5 points of the gold share."""
    from helpers import train_on_demo

    from rationale_cli.data.sources import load

    gold = [m for record in load("demo", "test") for m in record.gold_mask()]
    share = sum(gold) / len(gold)
    test = train_on_demo(tmp_path, "--extractor", "bernoulli", "--lagrangian", "--selection", f"{share:.3f}",
                         "--baseline", "loo", "--samples", "4", "--encoder", "rcnn", "--epochs", "7")
    assert test["precision"] > 0.85, test
    assert abs(test["selection_rate"] - share) <= 0.05, (test, share)


def test_dependent_prefix_counts_have_the_expected_costs_and_their_gradient_without_dependence():
    """The dependent selector's counts with each token replaced by its expectation given the
    sampled tokens before it: their mean over many samples is within 4 standard errors of
    the enumerated E[selected] and E[transitions] (padding counts for nothing); and where the
    choices do not move the later probabilities (the scan's z input zeroed), the gradient of
    E[selected] comes out exactly, the sample held fixed, except for the z input's own weights,
    through which the choices would move them (the estimator's bias)."""
    torch.manual_seed(0)
    selector = BernoulliSelector(2, dependent=True, z_hidden=3).double()
    states = torch.randn(1, 5, 2, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)

    def forced(bits):
        steps = iter(torch.tensor([*bits, 0.0], dtype=torch.float64).unbind())
        return lambda logits: next(steps).expand(logits.shape[0])

    def enumerated():
        expected = torch.zeros(2, dtype=torch.float64)
        for bits in itertools.product([0.0, 1.0], repeat=4):
            z, logits = selector.draw(states, mask, forced(bits))
            expected = expected + log_prob(logits, z, mask).exp() * torch.stack(counts(z, mask))[:, 0]
        return expected

    samples = 20000
    z, logits = selector.draw(states.expand(samples, -1, -1), mask.expand(samples, -1),
                              lambda t: torch.bernoulli(torch.sigmoid(t.detach())))
    estimate = torch.stack(prefix_counts(torch.sigmoid(logits), z, mask)).detach()
    exact = enumerated().detach()
    error = estimate.std(1) / samples**0.5
    assert ((estimate.mean(1) - exact).abs() < 4 * error).all(), (estimate.mean(1), exact, error)

    z_weight = selector.scan.cell.weight_ih
    with torch.no_grad():
        z_weight[2].zero_()  # the z input of the scan's cell
    names, params = zip(*selector.named_parameters())
    exact = torch.autograd.grad(enumerated()[0], params, allow_unused=True)
    z, logits = selector.draw(states, mask, lambda t: torch.bernoulli(torch.sigmoid(t.detach())))
    estimate = torch.autograd.grad(prefix_counts(torch.sigmoid(logits), z, mask)[0].sum(), params, allow_unused=True)
    for name, param, a, b in zip(names, params, estimate, exact):
        if param is z_weight:  # the bias: how the z input would move the later probabilities is left out
            assert not torch.allclose(a[2], b[2])
            a, b = a[:2], b[:2]
        assert (a is None and b is None) or torch.allclose(a, b), name


def test_straight_through_draws_are_bernoulli_with_the_relaxations_gradient():
    """Forward: 0/1 draws at frequency sigmoid(l) (within 4 standard errors over 40,000 draws);
    backward: the gradient of sigmoid((l + log u - log(1 - u)) / tau) for the same u."""
    logits = torch.tensor([-2.0, -0.3, 0.0, 1.5], dtype=torch.float64)
    many = logits.expand(40_000, 4).clone().requires_grad_(True)
    torch.manual_seed(3)
    z = straight_through(many, 0.5)
    assert set(z.unique().tolist()) <= {0.0, 1.0}
    p = torch.sigmoid(logits)
    assert torch.all((z.detach().mean(0) - p).abs() < 4 * torch.sqrt(p * (1 - p) / 40_000))
    weights = torch.randn(40_000, 4, dtype=torch.float64)
    (z * weights).sum().backward()
    torch.manual_seed(3)
    u = torch.rand_like(many).clamp(1e-6, 1 - 1e-6)
    soft = torch.sigmoid((many.detach() + torch.log(u) - torch.log1p(-u)) / 0.5)
    assert torch.allclose(many.grad, weights * soft * (1 - soft) / 0.5)


def test_straight_through_selection_carries_the_task_gradient_and_no_surrogate():
    selector = BernoulliSelector(3, estimator="straight-through", samples=1, baseline="loo")
    states, mask = torch.randn(2, 7, 3), torch.ones(2, 7)
    mask[1, 5:] = 0
    selection = selector(states, mask)
    assert selection.surrogate is None and not selection.skippable_zeros
    assert torch.all(selection.masks.detach()[1, :, 5:] == 0)
    (selection.masks * torch.randn(2, 1, 7)).sum().backward()
    assert selector.logit_layer.weight.grad.abs().sum() > 0


def test_straight_through_needs_the_independent_selector():
    with pytest.raises(ValueError, match="estimator"):
        BernoulliSelector(4, estimator="straight-through", dependent=True)
