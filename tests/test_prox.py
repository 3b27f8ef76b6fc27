"""Proximal operators of TV and OSCAR, fusedmax and oscarmax, against a generic QP
solver (tolerance 1e-5), and gradcheck of their backward passes."""

import numpy as np
import pytest
import torch
from qp import prox_by_qp

from rationale_cli.models.prox import oscar_prox, oscar_prox_row, tv_prox, tv_prox_row


def sparsemax(x):
    from entmax import sparsemax as projection

    return projection(x, dim=-1)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [0.05, 0.3, 1.5])
def test_prox_of_tv_and_oscar_solve_their_problems(seed, lam):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=int(rng.integers(2, 8))) * 2
    y, _ = tv_prox_row(x.tolist(), lam)
    np.testing.assert_allclose(y, prox_by_qp(x, lam, "tv", simplex=False), atol=1e-5)
    y, _ = oscar_prox_row(x.tolist(), lam)
    np.testing.assert_allclose(y, prox_by_qp(x, lam, "oscar", simplex=False), atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [0.0, 0.1, 0.5])
def test_sparsemax_and_fusedmax_solve_their_simplex_problems(seed, lam):
    """Proposition 2: fusedmax = P_simplex(P_TV(x)) exactly (lam = 0: sparsemax)."""
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=int(rng.integers(2, 8)))
    ones = torch.ones(1, len(x), dtype=torch.float64)
    fused = sparsemax(tv_prox(torch.tensor(x[None]), ones, lam))[0].numpy()
    np.testing.assert_allclose(fused, prox_by_qp(x, lam, "tv", simplex=True), atol=1e-5)


def test_groups_of_tv_are_adjacent_runs_and_padding_passes_through():
    x = torch.tensor([[3.0, 2.9, 3.1, -1.0, -1.2, 5.0, 0.0], [1.0, 4.0, 1.0, 9.0, 9.0, 9.0, 9.0]],
                     dtype=torch.float64)
    mask = torch.tensor([[1.0] * 6 + [0.0], [1.0, 1, 1, 0, 0, 0, 0]], dtype=torch.float64)
    y = tv_prox(x, mask, 0.5)
    assert torch.equal(y[1, 3:], x[1, 3:]) and y[0, 6] == x[0, 6]
    assert y[0, 0] == y[0, 1] == y[0, 2] and y[0, 3] == y[0, 4]
    assert torch.allclose(y[0, :6].sum(), x[0, :6].sum())  # TV prox keeps the mean
    y1 = tv_prox(x[1:, :3], mask[1:, :3], 0.5)
    assert torch.allclose(y[1, :3], y1[0])


@pytest.mark.parametrize("prox", [tv_prox, oscar_prox])
def test_gradcheck_of_the_group_jacobians(prox):
    torch.manual_seed(0)
    x = (torch.randn(3, 7, dtype=torch.float64) * 2).requires_grad_(True)
    mask = torch.ones(3, 7, dtype=torch.float64)
    mask[2, 5:] = 0
    assert torch.autograd.gradcheck(lambda t: prox(t, mask, 0.3) * mask, (x,), atol=1e-6)
    assert torch.autograd.gradcheck(lambda t: sparsemax(prox(t, mask, 0.3).masked_fill(mask == 0, -1e3)), (x,),
                                    atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_compiled_tv_prox_takes_the_python_loops_steps(dtype):
    """``tv_prox`` (the compiled taut string, all rows at once) against ``tv_prox_row`` on each
    row's real values: the same groups and, in float64, the same values; rows with gaps in
    their mask, empty, of one value, with ties, under a small and a large ``lam``."""
    from rationale_cli.models.native.tv_prox import compiled
    from rationale_cli.models.prox import _RowProx

    torch.manual_seed(2)
    x = torch.randn(7, 40, dtype=torch.float64) * 3
    x[3, :20] = 1.5  # ties
    mask = (torch.rand(7, 40) < 0.8).to(dtype)
    mask[1] = 0  # empty
    mask[2] = 0
    mask[2, 17] = 1  # one value
    x = x.to(dtype)
    if not compiled(x):
        pytest.skip("no C compiler (or RATIONALE_NATIVE=0): the loops are the Python ones")
    for lam in (0.05, 0.8, 50.0):
        y = _RowProx.apply(x, mask, lam, False)
        groups = _RowProx.apply(x.double().requires_grad_(), mask, lam, False).grad_fn.saved_tensors[0]
        assert torch.equal(y[mask == 0], x[mask == 0])
        for row in range(7):
            real = mask[row] > 0
            expected, expected_groups = tv_prox_row(x[row, real].double().tolist(), lam)
            assert groups[row, real].tolist() == expected_groups
            assert (groups[row, ~real] == -1).all()
            assert torch.allclose(y[row, real].double(), torch.tensor(expected, dtype=torch.float64),
                                  rtol=0, atol=1e-12 if dtype == torch.float64 else 1e-5)
