import re

import pytest
import torch

from rationale_cli.models.budget import Budget
from rationale_cli.models.model import RationaleModel
from rationale_cli.models.selectors import SELECTORS, build_selector
from rationale_cli.models.selectors.attention.attention import AttentionSelector, top_budget


def test_top_budget_picks_best_tokens_per_row_and_never_padding():
    scores = torch.tensor([[0.1, 0.9, 0.5, 0.3, 7.0], [0.2, 0.1, 0.4, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
    z = top_budget(scores, mask, Budget(0.5))
    # 50% of 4 tokens is 2; 50% of 3 tokens rounds half up to 2
    assert z.tolist() == [[0, 1, 1, 0, 0], [1, 0, 1, 0, 0]]


def test_top_budget_selects_at_least_one_token_and_breaks_ties_by_position():
    scores = torch.zeros(1, 6)
    mask = torch.ones(1, 6)
    z = top_budget(scores, mask, Budget(0.01))
    assert z.tolist() == [[1, 0, 0, 0, 0, 0]]


def test_attention_gate_is_in_unit_interval_and_zero_on_padding():
    torch.manual_seed(0)
    selector = AttentionSelector(8, budget=0.25)
    states = torch.randn(3, 7, 8)
    mask = torch.ones(3, 7)
    mask[1, 4:] = 0
    selection = selector(states, mask)
    gate = selection.masks[:, 0]
    assert gate.shape == (3, 7)
    assert torch.all(gate >= 0) and torch.all(gate <= 1 + 1e-6)
    assert torch.all(gate[1, 4:] == 0)
    assert torch.allclose(gate.amax(-1), torch.ones(3))
    assert torch.allclose(selection.weights, torch.ones(3, 1))
    decoded = selector.decode(states, mask)
    assert decoded[1, 4:].sum() == 0
    assert decoded[1].sum() == 1  # 25% of 4 tokens


def test_build_selector_refuses_options_it_does_not_declare_and_unknown_names():
    from rationale_cli.models.options import OptionError
    from rationale_cli.runs.flags import option_line  # the error as the command line words it

    selector = build_selector("attention", 4, budget=0.3)
    assert selector.options.budget == Budget(0.3)
    assert build_selector("full", 4).needs_states is False
    with pytest.raises(OptionError) as raised:
        build_selector("attention", 4, budget=0.3, k=7)
    assert re.search("--k does not apply to --extractor attention", option_line(raised.value))
    with pytest.raises(ValueError, match="nope"):
        build_selector("nope", 4)
    assert set(SELECTORS) >= {"full", "attention"}


def test_model_padding_does_not_change_predictions():
    torch.manual_seed(0)
    for extractor in ("full", "attention"):
        for encoder in ("rcnn", "lstm", "cnn"):
            model = RationaleModel(20, 6, 5, 1, encoder=encoder, extractor=extractor, dropout=0.0).eval()
            ids = torch.tensor([[3, 4, 5, 6, 0, 0], [3, 4, 5, 6, 7, 8]])
            mask = (ids != 0).float()
            z, scores, out = model.decode(ids, mask)
            z1, scores1, out1 = model.decode(ids[:1, :4], mask[:1, :4])
            assert torch.allclose(out[0], out1[0], atol=1e-5), (extractor, encoder)
            assert torch.equal(z[0, :4], z1[0])
            assert torch.all(z[0, 4:] == 0)


def test_dependent_scan_is_the_recurrence_of_eq_16_step_by_step():
    """theta_t = head([h_t; s_{t-1}]), s_t = rcnn([h_t; z_t], s_{t-1}) (Bastings et al., eq. 16),
    written naively, against the scan with its projections hoisted out of the loop: the same
    values and the same gradients, on a padded batch."""
    from rationale_cli.models.selectors.binary.dependent import DependentScan

    torch.manual_seed(0)
    scan = DependentScan(6, 2, z_hidden=5).double()
    states = torch.randn(3, 7, 6, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(3, 7, dtype=torch.float64)
    mask[1, 4:] = 0

    def draw(theta):
        return torch.sigmoid(theta[:, 0] - theta[:, 1])

    z, theta = scan(states, mask, draw)
    state = scan.cell.initial(3, states)
    naive_z, naive_theta = [], []
    for t in range(7):
        theta_t = scan.head(torch.cat([states[:, t], state[-1]], -1))
        z_t = draw(theta_t) * mask[:, t]
        state = scan.cell(torch.cat([states[:, t], z_t.unsqueeze(-1)], -1), state, mask[:, t])
        naive_z.append(z_t)
        naive_theta.append(theta_t)
    naive_z, naive_theta = torch.stack(naive_z, 1), torch.stack(naive_theta, 1)
    assert torch.allclose(z, naive_z, atol=1e-12) and torch.allclose(theta, naive_theta, atol=1e-12)
    weights = torch.randn(3, 7, dtype=torch.float64), torch.randn(3, 7, 2, dtype=torch.float64)
    params = [states, *scan.parameters()]
    grads = torch.autograd.grad((z * weights[0]).sum() + (theta * weights[1]).sum(), params)
    naive = torch.autograd.grad((naive_z * weights[0]).sum() + (naive_theta * weights[1]).sum(), params)
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(grads, naive))


@pytest.mark.parametrize("dependent", [False, True])
def test_hardkuma_zeros_carry_no_gradient_so_the_predictor_may_skip_them(dependent):
    """``constant_zeros``: a HardKuma sample that is exactly 0 has derivative 0 (the clamp),
    so a loss on the zeros alone gives the selector no gradient."""
    from rationale_cli.models.selectors.binary.hardkuma import HardKumaSelector

    torch.manual_seed(1)
    selector = HardKumaSelector(6, dependent=dependent).double()
    states = torch.randn(4, 9, 6, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(4, 9, dtype=torch.float64)
    selection = selector(states, mask)
    z = selection.masks[:, 0]
    assert selection.skippable_zeros and bool((z == 0).any()) and bool((z > 0).any())
    on_zeros = torch.randn_like(z) * (z == 0)
    grads = torch.autograd.grad((z * on_zeros).sum(), [states, *selector.parameters()], allow_unused=True)
    assert all(g is None or torch.all(g == 0) for g in grads)


def test_relaxed_and_estimated_masks_keep_their_zeros():
    """SIMPLE's sample carries the marginals' gradient at its zeros: not skippable."""
    from rationale_cli.models.selectors.subsets.simple import SimpleSelector

    selection = SimpleSelector(6, budget=3)(torch.randn(2, 8, 6, requires_grad=True), torch.ones(2, 8))
    assert not selection.skippable_zeros


def test_correlated_top_k_utilities_are_its_linear_maps_and_pair_convolution():
    from rationale_cli.models.selectors.subsets.topk import CorrelatedTopKSelector

    torch.manual_seed(0)
    selector = CorrelatedTopKSelector(6, budget=3)
    states = torch.randn(2, 7, 6, requires_grad=True)
    unary, pairwise = selector.utilities(states)
    pair = selector.pair(states.transpose(1, 2)).squeeze(1)
    expected = selector.left(states[:, :-1]).squeeze(-1) + selector.right(states[:, 1:]).squeeze(-1) + pair
    torch.testing.assert_close(unary, selector.unary(states).squeeze(-1))
    torch.testing.assert_close(pairwise, expected)
    grad = torch.autograd.grad((unary.sum() + (pairwise * torch.arange(6.0)).sum()), [states, *selector.parameters()])
    plain = torch.autograd.grad((selector.unary(states).sum() + (expected * torch.arange(6.0)).sum()),
                                [states, *selector.parameters()])
    for a, b in zip(grad, plain):
        torch.testing.assert_close(a, b)


def test_a_selector_keeps_the_options_it_is_given_whole():
    """Options made (and checked) once are kept as they are; values as keywords are checked
    by the selector; options of another extractor, or both at once, are a mistake."""
    from rationale_cli.models.options import OptionError
    from rationale_cli.models.selectors.binary.bernoulli import BernoulliOptions
    from rationale_cli.models.selectors.binary.hardkuma import HardKumaOptions

    options = HardKumaOptions(budget=Budget(0.2))
    assert build_selector("hardkuma", 8, options=options).options is options
    model = RationaleModel(30, 6, 5, 1, encoder="cnn", extractor="hardkuma", extractor_options=options)
    assert model.selector.options is options
    assert build_selector("hardkuma", 8, budget=0.3).options == HardKumaOptions(budget=Budget(0.3))
    with pytest.raises(OptionError, match="^budget 2.5: extractor hardkuma expects a share"):
        build_selector("hardkuma", 8, budget=2.5)
    with pytest.raises(TypeError, match="HardKumaSelector takes its options as HardKumaOptions, not BernoulliOptions"):
        build_selector("hardkuma", 8, options=BernoulliOptions())
    with pytest.raises(TypeError, match=r"given whole and as keywords \(budget\); give one or the other"):
        build_selector("hardkuma", 8, options=options, budget=0.3)
