"""HardKuma: closed forms against sampling and quadrature, log-space stability,
padding, and the Lagrange multipliers (Bastings et al., 2019, sections 3-4)."""

import math

import numpy as np
import pytest
import torch
from helpers import train_on_demo

from rationale_cli.models.distributions.hardkuma import HardKuma, shapes_at_rate
from rationale_cli.models.lagrangian import LagrangeMultiplier
from rationale_cli.models.selectors.binary.hardkuma import HardKumaSelector, expected_costs

SHAPES = [(0.5, 0.5), (1.0, 1.0), (2.0, 3.0), (0.3, 2.0), (5.0, 0.4)]


@pytest.mark.parametrize("a, b", SHAPES)
def test_sampled_atoms_match_closed_forms(a, b):
    n = 200_000
    gen = torch.Generator().manual_seed(0)
    dist = HardKuma(torch.full((n,), a, dtype=torch.float64), torch.full((n,), b, dtype=torch.float64))
    h = dist.rsample(generator=gen)
    for observed, expected in (((h == 0).double().mean(), dist.p0()[0]), ((h == 1).double().mean(), dist.p1()[0])):
        sd = math.sqrt(float(expected) * (1 - float(expected)) / n)
        assert abs(float(observed) - float(expected)) < 4 * sd + 1e-12
    sd_mean = float(h.std()) / math.sqrt(n)
    assert abs(float(h.mean()) - float(dist.mean()[0])) < 4 * sd_mean


@pytest.mark.parametrize("rate", [0.02, 0.13, 0.2, 0.5, 0.9])
@pytest.mark.parametrize("a", [math.log(2.0), 1.0])
def test_shapes_at_rate_put_the_expected_l0_at_the_rate(rate, a):
    """Eq. 8 inverted for b: P(H != 0) = (1 - k0^a)^b = rate, in closed form and by sampling."""
    a, b = shapes_at_rate(rate, a)
    n = 100_000
    dist = HardKuma(torch.full((n,), a, dtype=torch.float64), torch.full((n,), b, dtype=torch.float64))
    assert float(dist.p_nonzero()[0]) == pytest.approx(rate, rel=1e-9)
    observed = float((dist.rsample(generator=torch.Generator().manual_seed(0)) != 0).double().mean())
    assert abs(observed - rate) < 4 * math.sqrt(rate * (1 - rate) / n)


@pytest.mark.parametrize("dependent", [False, True])
def test_selector_starts_with_its_expected_l0_at_the_budget(dependent):
    """Before any step the shapes' biases give every token P(z != 0) = budget: exactly where the
    states are 0 (the dependent selector's later tokens also see the sampled prefix), and the
    sampled share agrees; PyTorch's own bias gave about 0.87."""
    torch.manual_seed(0)
    selector = HardKumaSelector(8, budget=0.13, dependent=dependent)
    states, mask = torch.zeros(400, 50, 8), torch.ones(400, 50)
    _, dist = selector.run(states, mask, HardKuma.rsample)
    first = dist.p_nonzero()[:, 0] if dependent else dist.p_nonzero()
    assert torch.allclose(first, torch.full_like(first, 0.13), atol=1e-6)
    if not dependent:
        selection = selector(states, mask)
        assert float(selection.stats["expected_l0"]) == pytest.approx(0.13, abs=1e-6)
        n = mask.numel()
        assert abs(float(selection.stats["selected"]) - 0.13) < 4 * math.sqrt(0.13 * 0.87 / n)


def test_first_demo_epoch_selects_near_the_target(tmp_path):
    """One epoch with the defaults (target 13%): sampled in training and decoded on the
    validation split, within 5 points of it (before the start at the target: 8.8% sampled,
    1.1% decoded)."""
    import json

    from typer.testing import CliRunner

    from rationale_cli.cli import app

    result = CliRunner().invoke(app, ["train", "--data", "demo", "--out", str(tmp_path / "run"), "--epochs", "1"])
    assert result.exit_code == 0, result.output
    epoch = json.loads((tmp_path / "run" / "metrics.json").read_text())["history"][0]
    assert abs(epoch["selected"] - 0.13) <= 0.05 and abs(epoch["valid_selection_rate"] - 0.13) <= 0.05, epoch


@pytest.mark.parametrize("a, b", SHAPES)
def test_cdf_is_monotone_and_matches_the_integrated_density(a, b):
    dist = HardKuma(torch.tensor([a], dtype=torch.float64), torch.tensor([b], dtype=torch.float64))
    grid = np.linspace(0.0, 0.999, 400)
    cdf = np.array([float(dist.cdf(float(h))) for h in grid])
    assert np.all(np.diff(cdf) >= -1e-12)
    # P(H <= h) = P(H = 0) + int_0^h f_T(t) dt, with the stretched Kumaraswamy density
    def density(t):
        k = (t - dist.l) / (dist.r - dist.l)
        return a * b * k ** (a - 1) * (1 - k**a) ** (b - 1) / (dist.r - dist.l)

    for h in (0.1, 0.5, 0.9):
        ts = np.linspace(0.0, h, 20001)
        integral = np.trapezoid(density(ts), ts)
        assert float(dist.cdf(h)) == pytest.approx(float(dist.p0()) + integral, abs=1e-4)
    assert float(dist.p0()) == pytest.approx(float(dist.cdf(0.0)), abs=1e-12)


def test_log_space_terms_are_finite_with_finite_gradients_over_the_whole_range():
    values = torch.tensor([1e-6, 1e-3, 0.1, 1.0, 10.0, 100.0], dtype=torch.float32)
    a, b = torch.meshgrid(values, values, indexing="ij")
    a = a.reshape(-1).clone().requires_grad_(True)
    b = b.reshape(-1).clone().requires_grad_(True)
    dist = HardKuma(a, b)
    terms = [dist.log_p0(), dist.log_p1(), dist.log_p_nonzero(), dist.mean(), dist.rsample()]
    for term in terms:
        assert torch.isfinite(term).all()
    total = sum(t.sum() for t in terms)
    total.backward()
    assert torch.isfinite(a.grad).all() and torch.isfinite(b.grad).all()
    probs = dist.p0() + dist.p_continuous() + dist.p1()
    assert torch.allclose(probs, torch.ones_like(probs), atol=1e-5)


def test_expected_costs_ignore_padding():
    torch.manual_seed(0)
    log_p0 = torch.log(torch.rand(2, 6))
    log_nz = torch.log1p(-torch.exp(log_p0))
    mask = torch.tensor([[1.0, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    l0, tr = expected_costs(log_p0, log_nz, mask)
    l0_a, tr_a = expected_costs(log_p0[:1, :4], log_nz[:1, :4], mask[:1, :4])
    l0_b, tr_b = expected_costs(log_p0[1:], log_nz[1:], mask[1:])
    assert torch.allclose(l0, torch.cat([l0_a, l0_b])) and torch.allclose(tr, torch.cat([tr_a, tr_b]))
    assert float(l0_b) == pytest.approx(float(torch.exp(log_nz[1]).sum()), rel=1e-6)
    # brute force for one document: E[transitions] by enumeration of independent z != 0 events
    p = torch.exp(log_nz[1]).tolist()
    expected = 0.0
    for bits in range(2 ** 6):
        z = [(bits >> i) & 1 for i in range(6)]
        prob = math.prod(pi if zi else 1 - pi for pi, zi in zip(p, z))
        expected += prob * sum(z[i] != z[i + 1] for i in range(5))
    assert float(tr_b) == pytest.approx(expected, rel=1e-5)


def test_fixed_coherence_weight_adds_the_expected_transitions_per_document():
    """Appendix B.1: a fixed fused-lasso weight on E[transitions] (eq. 12, summed per document)."""
    torch.manual_seed(0)
    states, mask = torch.randn(3, 7, 4), torch.tensor([[1.0] * 7, [1.0] * 5 + [0.0] * 2, [1.0] * 3 + [0.0] * 4])
    plain = HardKumaSelector(4, budget=0.2, dependent=False).eval()
    weighted = HardKumaSelector(4, budget=0.2, dependent=False, coherence=0.5).eval()
    weighted.load_state_dict(plain.state_dict())
    with torch.no_grad():
        _, dist = plain.run(states, mask, HardKuma.rsample)
        flips = expected_costs(dist.log_p0(), dist.log_p_nonzero(), mask)[1]
        difference = weighted(states, mask).penalty - plain(states, mask).penalty
    assert float(difference) == pytest.approx(0.5 * float(flips.mean()), rel=1e-5) and float(difference) > 0
    with pytest.raises(ValueError):
        HardKumaSelector(4, transitions=0.02, coherence=0.5)


@pytest.mark.parametrize("dependent", [False, True])
def test_selector_padding_never_changes_anything(dependent):
    torch.manual_seed(0)
    selector = HardKumaSelector(8, budget=0.3, dependent=dependent).eval()
    states = torch.randn(1, 5, 8)
    padded = torch.cat([states, torch.randn(1, 3, 8)], 1)
    mask = torch.ones(1, 5)
    padded_mask = torch.cat([mask, torch.zeros(1, 3)], 1)
    z = selector.decode(states, mask)
    z_padded = selector.decode(padded, padded_mask)
    assert torch.allclose(z, z_padded[:, :5]) and torch.all(z_padded[:, 5:] == 0)
    scores = selector.token_scores(padded, padded_mask)
    assert torch.allclose(scores[:, :5], selector.token_scores(states, mask)) and torch.all(scores[:, 5:] == 0)
    if not dependent:  # expected costs do not depend on the sample
        assert torch.allclose(selector(states, mask).penalty, selector(padded, padded_mask).penalty)


def test_multiplier_moves_in_training_only():
    lam = LagrangeMultiplier(init=0.01, lr=0.5, alpha=0.0)
    lam.eval()
    lam(torch.tensor(0.5))
    assert float(lam.value) == pytest.approx(0.01)
    lam.train()
    lam(torch.tensor(0.5))
    assert float(lam.value) == pytest.approx(0.01 * math.exp(0.25))
    lam(torch.tensor(-0.5))  # alpha 0: the moving average is the batch value
    assert float(lam.value) == pytest.approx(0.01)
    big = LagrangeMultiplier(init=1.0, lr=10.0, alpha=0.0, maximum=5.0)
    big(torch.tensor(1.0))
    assert float(big.value) == 5.0


def test_lagrangian_term_has_the_moving_average_value_and_the_batch_gradient():
    lam = LagrangeMultiplier(init=2.0, lr=0.0, alpha=0.5)
    x = torch.tensor(0.4, requires_grad=True)
    lam(torch.tensor(0.0))  # moving average 0
    term = lam(x * 1.0)  # moving average 0.2
    assert term.item() == pytest.approx(2.0 * 0.2)
    term.backward()
    assert float(x.grad) == pytest.approx(2.0)


def test_selector_multipliers_do_not_move_in_eval_mode():
    torch.manual_seed(0)
    selector = HardKumaSelector(4, budget=0.01)
    states, mask = torch.randn(3, 7, 4), torch.ones(3, 7)
    selector.eval()
    before = selector.lambda_l0.value.clone()
    selector(states, mask)
    assert torch.equal(selector.lambda_l0.value, before)
    selector.train()
    selector(states, mask)
    assert float(selector.lambda_l0.value) > float(before)


@pytest.mark.slow
def test_training_on_the_demo_corpus_hits_the_selection_target_with_high_precision(tmp_path):
    """``--selection 0.2`` ends within 2 points of 20% on the test split, precision above 90%. (Started
    at the target, the rate rises to 22-23% by epoch 5 while the multiplier catches up, then settles.)"""
    test = train_on_demo(tmp_path, "--extractor", "hardkuma", "--encoder", "rcnn", "--selection", "0.2",
                         "--transitions", "0.06", "--epochs", "8", "--independent")
    assert abs(test["selection_rate"] - 0.2) <= 0.02, test
    assert test["precision"] > 0.9, test


def test_dependent_selector_matches_the_step_by_step_definition():
    """The pre-projected loop equals eq. 16 written out: a, b = f([h_i; s_{i-1}]), s_i = rcnn([h_i; z_i])."""
    import torch.nn.functional as F

    from rationale_cli.models.selectors.binary.hardkuma import most_likely

    torch.manual_seed(1)
    selector = HardKumaSelector(6, dependent=True, z_hidden=5).eval()
    states, mask = torch.randn(3, 7, 6), torch.ones(3, 7)
    mask[2, 5:] = 0
    scan = selector.scan
    state = scan.cell.initial(3, states)
    expected = []
    for t in range(7):
        a, b = F.softplus(scan.head(torch.cat([states[:, t], state[-1]], -1))).unbind(-1)
        z_t = most_likely(HardKuma(a, b)) * mask[:, t]
        state = scan.cell(torch.cat([states[:, t], z_t.unsqueeze(-1)], -1), state, mask[:, t])
        expected.append(z_t)
    assert torch.allclose(selector.decode(states, mask), torch.stack(expected, 1), atol=1e-6)
