"""SparseMAP with a budget: marginals against a generic QP (projection onto the budget
polytope), a sparse distribution over at most n + 1 masks, gradcheck of the backward."""

import numpy as np
import pytest
import torch
from qp import solve_qp

import rationale_cli.models.distributions.sparsemap as sparsemap_module
from rationale_cli.models.distributions.sparsemap import (
    budget_oracle,
    budget_projection,
    greedy_masks,
    solve_sparsemap,
    sparsemap,
)


@pytest.fixture(params=[True, False], ids=["closed-form-start", "oracle-start"])
def start(request, monkeypatch):
    """Run a test with either start of Algorithm 1 (the closed form is the default)."""
    solve = sparsemap_module.solve_sparsemap
    monkeypatch.setattr(sparsemap_module, "solve_sparsemap",
                        lambda *args, **kw: solve(*args, **kw, closed_form=request.param))
    return request.param


def solve_one(t, budget, w=None):
    """One document's support as numpy columns ``[n, s]`` and its weights ``[s]``."""
    row = torch.from_numpy(np.asarray(t, float))[None]
    pair = None if w is None else torch.from_numpy(np.asarray(w, float))[None]
    masks, weights, sizes = sparsemap_module.solve_sparsemap(row, torch.ones_like(row), torch.tensor([budget]), pair)
    return masks[0, : sizes[0]].T.numpy(), weights[0, : sizes[0]].numpy()


def oracle_one(t, budget, w=None):
    row = torch.tensor(t, dtype=torch.float64)[None]
    pair = None if w is None else torch.tensor(w, dtype=torch.float64)[None]
    return budget_oracle(row, torch.ones_like(row), torch.tensor([budget]), pair)[0].numpy()


def budget_projection_qp(t, budget):
    """argmin ||mu - t||^2 over {0 <= mu <= 1, sum mu <= B} by the generic QP solver."""
    n = len(t)
    G = np.vstack([np.eye(n), -np.eye(n), np.ones((1, n))])
    h = np.concatenate([np.ones(n), np.zeros(n), [budget]])
    return solve_qp(np.eye(n), -t, G, h)


def test_budget_oracle_takes_the_best_positive_scores():
    assert oracle_one([0.5, -1.0, 2.0, 0.1], 2).tolist() == [1, 0, 1, 0]
    assert oracle_one([-0.5, -1.0], 2).tolist() == [0, 0]


@pytest.mark.parametrize("seed", range(8))
def test_marginals_are_the_projection_onto_the_budget_polytope(seed, start):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 10))
    t = rng.normal(size=n) * 1.5 + 0.3
    budget = int(rng.integers(1, n + 1))
    active, xi = solve_one(t, budget)
    assert np.all(xi > 0) and abs(xi.sum() - 1) < 1e-12 and len(xi) <= n + 1
    assert np.all(active.sum(0) <= budget) and set(np.unique(active)) <= {0.0, 1.0}
    np.testing.assert_allclose(active @ xi, budget_projection_qp(t, budget), atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_marginals_match_entmax_budget_sparsemax_where_the_budget_binds(seed, start):
    """Where the projection puts the whole budget on the tokens, it is entmax's
    budget-constrained sparsemax (the projection onto {0 <= p <= 1, sum p = B})."""
    from entmax.root_finding import budget_bisect

    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(6, 12))
    t = rng.normal(size=n) + 1.0
    budget = int(rng.integers(2, int(np.clip(t, 0, 1).sum())))  # less than the unconstrained projection's sum
    active, xi = solve_one(t, budget)
    mu = active @ xi
    assert abs(mu.sum() - budget) < 1e-9  # the budget binds
    expected = budget_bisect(torch.tensor(t[None]), budget, n_iter=100)[0].numpy()
    np.testing.assert_allclose(mu, expected, atol=1e-6)


def test_max_support_keeps_the_most_probable_masks_renormalized():
    from rationale_cli.models.selectors.marginalization.sparsemap import SparseMAPSelector

    torch.manual_seed(0)
    selector = SparseMAPSelector(4, budget=0.5).double()
    torch.nn.init.constant_(selector.score.bias, 0.4)  # scores near 0.4: many fractional marginals
    capped = SparseMAPSelector(4, budget=0.5, max_support=2).double()
    capped.load_state_dict(selector.state_dict())
    states = torch.randn(3, 8, 4, dtype=torch.float64) * 0.1
    mask = torch.ones(3, 8, dtype=torch.float64)
    weights, masks = selector.solve(states, mask)
    assert (weights > 0).sum(-1).max() > 2  # the cap matters here
    kept, kept_masks = capped.solve(states, mask)
    assert kept.shape[1] == 2 and torch.allclose(kept.sum(-1), torch.ones(3, dtype=torch.float64))
    top = weights.topk(2, -1)
    assert torch.allclose(kept, top.values / top.values.sum(-1, keepdim=True))
    assert torch.equal(kept_masks, masks.gather(1, top.indices.unsqueeze(-1).expand(-1, -1, 8)))


def test_batched_supports_padding_and_weights(start):
    torch.manual_seed(0)
    scores = torch.randn(3, 7, dtype=torch.float64)
    mask = torch.ones(3, 7, dtype=torch.float64)
    mask[1, 4:] = 0
    weights, masks = sparsemap(scores, mask, torch.tensor([2, 1, 3]))
    assert torch.allclose(weights.sum(-1), torch.ones(3, dtype=torch.float64))
    assert torch.all(masks[1, :, 4:] == 0)
    assert torch.all(masks.sum(-1) <= torch.tensor([2, 1, 3]).unsqueeze(1))
    for row in range(3):
        n = int(mask[row].sum())
        expected = budget_projection_qp(scores[row, :n].numpy(), [2, 1, 3][row])
        marginals = (weights[row].unsqueeze(-1) * masks[row]).sum(0)[:n]
        np.testing.assert_allclose(marginals.numpy(), expected, atol=1e-5)


def test_gradcheck_of_the_backward_pass(start):
    torch.manual_seed(1)
    scores = (torch.randn(2, 6, dtype=torch.float64) * 0.5 + 0.3).requires_grad_(True)
    mask = torch.ones(2, 6, dtype=torch.float64)
    budgets = torch.tensor([3, 2])
    costs = torch.randn(2, 6, dtype=torch.float64)

    def expected_cost(t):  # sum over the support of xi_z * <c, z>
        weights, masks = sparsemap(t, mask, budgets)
        return (weights * (masks * costs.unsqueeze(1)).sum(-1)).sum(-1)

    assert torch.autograd.gradcheck(expected_cost, (scores,), atol=1e-6)
    assert torch.autograd.gradcheck(lambda t: sparsemap(t, mask, budgets)[0], (scores,), atol=1e-6)


def test_selector_marginalizes_the_task_loss_over_its_support():
    """The trainer's loss equals the explicit sum over the support of xi_z * loss(z)."""
    from rationale_cli.models.model import RationaleModel
    from rationale_cli.runs.task import Regression

    torch.manual_seed(2)
    model = RationaleModel(30, 6, 5, 1, encoder="cnn", extractor="sparsemap", dropout=0.0,
                           extractor_options={"budget": 0.4}).double()
    ids = torch.tensor([[3, 4, 5, 6, 7, 0], [8, 9, 10, 11, 12, 13]])
    mask = (ids != 0).double()
    targets = torch.tensor([0.2, 0.9], dtype=torch.float64)
    selection, outputs = model(ids, mask)
    task_loss = Regression().loss(outputs, targets.unsqueeze(1).expand(-1, outputs.shape[1]))
    marginalized = (selection.weights * task_loss).sum(-1)
    emb = model.embed(ids)
    for row in range(2):
        explicit = 0.0
        for weight, z in zip(selection.weights[row], selection.masks[row]):
            if weight > 0:
                out = model.predict_masked(emb[row : row + 1], mask[row : row + 1], z[None, None])
                explicit = explicit + weight * Regression().loss(out[:, 0], targets[row : row + 1])[0]
        assert torch.allclose(marginalized[row], explicit)
    assert selection.stats["support"] >= 1


@pytest.mark.slow
def test_sparsemap_on_the_demo_corpus_is_precise_when_chosen_by_validation_loss(tmp_path):
    """SparseMAP on the demo depends on the seed more than the other extractors (a review
    whose support narrows to one mask stops teaching its selector; which masks a support
    holds turns on rounding, so the same seed lands differently on different CPUs): after 3
    epochs seeds 0, 1, 2 reached 0.76 / 0.97 / 0.98 precision on one machine and
    0.34 / 0.99 / 0.78 on another, every one at its 20%. Their validation task loss tells
    the precise run apart (0.048 / 0.0024 / 0.016 on the second machine), so the test trains
    the three and keeps the one a user would keep without gold rationales: the lowest
    validation loss."""
    import json

    from helpers import train_on_demo

    runs = []
    for seed in (0, 1, 2):
        test = train_on_demo(tmp_path / str(seed), "--extractor", "sparsemap", "--budget", "0.2", "--encoder",
                             "rcnn", "--epochs", "3", "--seed", str(seed))
        valid = json.loads((tmp_path / str(seed) / "run" / "metrics.json").read_text())["valid"]
        runs.append((valid["loss"], test))
    test = min(runs, key=lambda run: run[0])[1]
    assert test["precision"] > 0.85, runs
    assert abs(test["selection_rate"] - 0.2) <= 0.02, test


def pair_indicators(columns):
    """``z_i z_{i+1}`` of each mask (columns ``[n, s]``) ``[n - 1, s]``."""
    return columns[:-1] * columns[1:]


def sparsemap_by_enumeration(t, w, budget):
    """min over xi in the simplex over all masks of 1/2 ||A xi - (t, w)||^2, a_z = (z, pair indicators),
    by the generic QP."""
    import itertools

    n = len(t)
    masks = np.array([bits for bits in itertools.product([0, 1], repeat=n) if sum(bits) <= budget], float).T
    vectors = np.concatenate([masks, masks[:-1] * masks[1:]])
    target = np.concatenate([t, w])
    s = masks.shape[1]
    xi = solve_qp(vectors.T @ vectors + 1e-9 * np.eye(s), -vectors.T @ target, -np.eye(s), np.zeros(s),
                  np.ones((1, s)), np.ones(1))
    return vectors @ xi, 0.5 * np.sum((vectors @ xi - target) ** 2)


@pytest.mark.parametrize("seed", range(6))
def test_coherence_factor_matches_the_problem_over_all_masks(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    t, w = rng.normal(size=n), rng.normal(size=n - 1) * 1.5
    budget = int(rng.integers(1, n + 1))
    # the oracle against brute force
    best = max((np.array(bits, float) for bits in np.ndindex(*([2] * n)) if sum(bits) <= budget),
               key=lambda z: z @ t + (z[:-1] * z[1:]) @ w)
    z = oracle_one(t, budget, w)
    assert z @ t + pair_indicators(z[:, None])[:, 0] @ w == pytest.approx(best @ t + (best[:-1] * best[1:]) @ w)
    active, xi = solve_one(t, budget, w)
    expected_mu, expected_objective = sparsemap_by_enumeration(t, w, budget)
    vectors = np.concatenate([active, pair_indicators(active)])
    assert 0.5 * np.sum((vectors @ xi - np.concatenate([t, w])) ** 2) == pytest.approx(expected_objective, abs=1e-6)
    np.testing.assert_allclose(vectors @ xi, expected_mu, atol=1e-5)


def test_gradcheck_with_the_coherence_factor():
    torch.manual_seed(3)
    scores = (torch.randn(2, 6, dtype=torch.float64) * 0.5 + 0.3).requires_grad_(True)
    pair = (torch.randn(2, 5, dtype=torch.float64) * 0.5).requires_grad_(True)
    mask = torch.ones(2, 6, dtype=torch.float64)
    mask[1, 5] = 0
    budgets = torch.tensor([3, 2])
    costs = torch.randn(2, 6, dtype=torch.float64)

    def expected_cost(t, w):
        weights, masks = sparsemap(t, mask, budgets, w)
        return (weights * (masks * costs.unsqueeze(1)).sum(-1)).sum(-1)

    assert torch.autograd.gradcheck(expected_cost, (scores, pair), atol=1e-6)


@pytest.mark.parametrize("extractor", ["sparsemap", "topk-sparsemax"])
def test_pairwise_option_reaches_the_selector_and_starts_without_coherence(extractor):
    from rationale_cli.models.model import RationaleModel
    from rationale_cli.runs.config import from_values

    options = from_values({"extractor": extractor, "pairwise": True}).options
    model = RationaleModel(30, 6, 5, 1, encoder="cnn", extractor=extractor, extractor_options=options)
    assert model.selector.pair is not None
    assert torch.all(model.selector.pair.weight == 0) and torch.all(model.selector.pair.bias == 0)
    plain = RationaleModel(30, 6, 5, 1, encoder="cnn", extractor=extractor)
    assert plain.selector.pair is None


@pytest.mark.parametrize("pairwise", [False, True])
def test_a_batch_solves_each_document_as_if_alone(pairwise):
    """Algorithm 1 in lockstep: one document's support and weights do not depend on the
    others in its batch (which finish earlier or later, grow the slots, drop masks)."""
    torch.manual_seed(4)
    scores = torch.randn(6, 9, dtype=torch.float64) * torch.tensor([0.2, 1.0, 3.0, 0.5, 8.0, 1.5])[:, None] + 0.3
    pair = torch.randn(6, 8, dtype=torch.float64) if pairwise else None
    mask = torch.ones(6, 9, dtype=torch.float64)
    mask[2, 6:] = 0
    mask[5, 1:] = 0
    budgets = torch.tensor([2, 3, 4, 9, 1, 2])
    masks, weights, sizes = solve_sparsemap(scores, mask, budgets, pair)
    for row in range(6):
        alone = solve_sparsemap(scores[row : row + 1], mask[row : row + 1], budgets[row : row + 1],
                                None if pair is None else pair[row : row + 1])
        assert sizes[row] == alone[2][0]
        assert torch.equal(masks[row, : sizes[row]], alone[0][0, : sizes[row]])
        assert torch.allclose(weights[row, : sizes[row]], alone[1][0, : sizes[row]], atol=1e-12)
        assert torch.all(weights[row, sizes[row] :] == 0)


def test_long_runs_of_support_changes_stay_exact():
    """Scores spread wide (a trained selector's) need long runs of added and dropped masks,
    where the inverses' rank-2 updates lose accuracy without the refinement and the
    fresh inversions (this case then ends far from the projection, or singular)."""
    torch.manual_seed(0)
    scores = ((torch.rand(4, 150) * 0.5 - 0.3) * 20 + 0.4).double()
    budgets = torch.full((4,), 20)
    masks, weights, sizes = solve_sparsemap(scores, torch.ones_like(scores), budgets, closed_form=False)
    # the projection is clip(t - tau, 0, 1) with tau >= 0 the least that meets the budget
    low, high = torch.zeros(4, 1, dtype=torch.float64), scores.max(-1, keepdim=True).values
    for _ in range(200):
        middle = (low + high) / 2
        over = (scores - middle).clamp(0, 1).sum(-1, keepdim=True) > 20
        low, high = torch.where(over, middle, low), torch.where(over, high, middle)
    expected = (scores - high).clamp(0, 1)
    assert torch.allclose((weights.unsqueeze(-1) * masks).sum(1), expected, atol=1e-6)


@pytest.mark.parametrize("extractor", ["sparsemap", "topk-sparsemax"])
def test_only_weighted_masks_are_read_with_the_same_loss_and_gradients(extractor):
    """Supports of different sizes are padded with weight-0 masks; the predictor reads only
    the weighted ones, and the loss and every gradient equal reading them all."""
    from rationale_cli.models.model import RationaleModel
    from rationale_cli.runs.task import Regression

    torch.manual_seed(6)
    model = RationaleModel(40, 6, 5, 1, encoder="cnn", extractor=extractor, dropout=0.0,
                           extractor_options={"budget": 0.4}).double()
    ids = torch.randint(1, 40, (4, 9))
    ids[1, 5:] = 0
    mask = (ids != 0).double()
    targets = torch.rand(4, 1, dtype=torch.float64)

    def loss_and_grads(outputs_of):
        model.zero_grad()
        selection, outputs = outputs_of()
        loss = (selection.weights * Regression().loss(outputs, targets.expand(-1, outputs.shape[1]))).sum()
        loss.backward()
        return selection, loss.detach(), [None if p.grad is None else p.grad.clone() for p in model.parameters()]

    def read_all():
        emb = model.embed(ids)
        selection = model.selector(model.states(emb, mask), mask)
        return selection, model.predict_masked(emb, mask, selection.masks)

    selection, packed, packed_grads = loss_and_grads(lambda: model(ids, mask))
    assert (selection.weights == 0).any()  # the padding this is about
    _, full, full_grads = loss_and_grads(read_all)
    assert torch.allclose(packed, full)
    assert sum(g is not None for g in packed_grads) > 2
    for a, b in zip(packed_grads, full_grads):
        assert (a is None and b is None) or torch.allclose(a, b, atol=1e-10)



def random_marginals(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scores, padding mask and budgets of a batch whose projections have tokens at 0, at 1
    and between, with and without a binding budget, one document empty of tokens."""
    torch.manual_seed(seed)
    scores = torch.randn(6, 12, dtype=torch.float64) * torch.tensor([0.3, 1.0, 2.0, 0.2, 4.0, 1.0])[:, None] + 0.5
    mask = torch.ones(6, 12, dtype=torch.float64)
    mask[1, 7:] = 0
    mask[5] = 0
    return scores, mask, torch.tensor([3, 2, 5, 12, 1, 2])


@pytest.mark.parametrize("seed", range(4))
def test_budget_projection_is_the_qp_projection(seed):
    scores, mask, budgets = random_marginals(seed)
    mu = budget_projection(scores, mask, budgets)
    assert torch.all(mu[mask == 0] == 0)
    for row in range(5):
        n = int(mask[row].sum())
        expected = budget_projection_qp(scores[row, :n].numpy(), int(budgets[row]))
        np.testing.assert_allclose(mu[row, :n].numpy(), expected, atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_greedy_masks_decompose_the_marginals_into_affinely_independent_masks(seed):
    """The masks' mixture is the marginals exactly; each mask holds ceil(sum mu) tokens or one
    fewer; the first is the MAP mask (the largest marginals); the masks are affinely
    independent (the KKT matrix is invertible); about one mask per fractional marginal."""
    scores, mask, budgets = random_marginals(seed)
    mu = budget_projection(scores, mask, budgets)
    masks, weights = greedy_masks(mu)
    assert torch.allclose((weights.unsqueeze(-1) * masks).sum(1), mu, atol=1e-12)
    assert torch.allclose(weights.sum(-1), torch.ones(6, dtype=torch.float64))
    for row in range(6):
        used = weights[row] > 0
        support, size = masks[row, used], int(torch.ceil(mu[row].sum() - 1e-12))
        assert torch.all((support.sum(-1) == size) | (support.sum(-1) == size - 1))
        assert torch.all(support.sum(-1) <= budgets[row])
        fractional = int(((mu[row] > 0) & (mu[row] < 1)).sum())
        assert len(support) <= fractional + 1
        bordered = torch.cat([support, torch.ones(len(support), 1, dtype=torch.float64)], -1)
        assert torch.linalg.matrix_rank(bordered) == len(support)
        top = mu[row].topk(int(support[0].sum())).indices
        assert torch.equal(support[0].nonzero().flatten().sort().values, top.sort().values)


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_greedy_masks_equal_the_pytorch_loop(seed, monkeypatch):
    """The same masks and weights from the C loop (models/native/greedy_masks.c) as from the
    batch loop, on projections (many exact 0s and 1s, so ties) and on random marginals, with
    an empty row and a row of zeros."""
    from rationale_cli.models.distributions import sparsemap as module
    from rationale_cli.models.native import greedy_masks as native

    if not native.compiled(torch.zeros(1, dtype=torch.float64)):
        pytest.skip("no C compiler")
    scores, mask, budgets = random_marginals(seed)
    generator = torch.Generator().manual_seed(seed)
    for mu in (budget_projection(scores, mask, budgets), torch.rand(5, 40, generator=generator, dtype=torch.float64),
               torch.zeros(2, 7, dtype=torch.float64), torch.zeros(3, 0, dtype=torch.float64)):
        compiled = greedy_masks(mu)
        monkeypatch.setattr(native, "compiled", lambda mu: False)
        plain = module.greedy_masks(mu)
        monkeypatch.undo()
        assert compiled[0].shape == plain[0].shape
        assert torch.equal(compiled[0], plain[0])
        torch.testing.assert_close(compiled[1], plain[1], atol=1e-15, rtol=0)


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_budget_projection_equals_the_pytorch_bisection(seed, monkeypatch):
    """The projection's bisection in C (models/native/greedy_masks.c) against the batch one, with
    a float32 mask as training gives it, budgets of 0, ties, a masked row; and no positions."""
    from rationale_cli.models.native import greedy_masks as native

    if not native.compiled(torch.zeros(1, dtype=torch.float64)):
        pytest.skip("no C compiler")
    scores, mask, budgets = random_marginals(seed)
    scores[2, :4] = scores[2, 5]  # ties
    budgets[3] = 0
    compiled = budget_projection(scores, mask.float(), budgets)
    assert budget_projection(scores[:, :0], mask[:, :0], budgets).shape == (6, 0)
    monkeypatch.setattr(native, "compiled", lambda x: False)
    torch.testing.assert_close(compiled, budget_projection(scores, mask.float(), budgets), atol=1e-15, rtol=0)


@pytest.mark.parametrize("seed", range(4))
def test_the_closed_form_start_is_optimal_at_once(seed, monkeypatch):
    """From the closed form, Algorithm 1 asks its oracle once and adds no mask, and ends at the
    projection, as from the oracle's mask.
    (The two supports differ: a projection has many decompositions into masks.)"""
    scores, mask, budgets = random_marginals(seed)
    calls = []
    monkeypatch.setattr(sparsemap_module, "budget_oracle",
                        lambda *args: calls.append(1) or budget_oracle(*args))
    added = []
    add = sparsemap_module.Supports.add
    monkeypatch.setattr(sparsemap_module.Supports, "add", lambda self, rows, *a: added.append(int(rows.sum())) or add(self, rows, *a))
    masks, weights, _ = solve_sparsemap(scores, mask, budgets)
    assert len(calls) == 1 and sum(added) == 0
    calls.clear()
    cold_masks, cold_weights, _ = solve_sparsemap(scores, mask, budgets, closed_form=False)
    assert len(calls) > 2 and sum(added) > 0  # the oracle start builds its supports one mask at a time
    marginals = (weights.unsqueeze(-1) * masks).sum(1)
    assert torch.allclose(marginals, budget_projection(scores, mask, budgets), atol=1e-9)
    assert torch.allclose(marginals, (cold_weights.unsqueeze(-1) * cold_masks).sum(1), atol=1e-9)
