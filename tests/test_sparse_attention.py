"""Sparse attention rationales: sparsemax against its KKT conditions, padding, support."""

import torch

from models.selectors.sparse_attention import SparseAttentionSelector


def sparsemax_reference(x):
    """Euclidean projection onto the simplex by sorting (Martins & Astudillo, 2016, Alg. 1)."""
    z, _ = torch.sort(x, descending=True)
    cumulative = z.cumsum(0)
    ks = torch.arange(1, len(x) + 1, dtype=x.dtype)
    support = 1 + ks * z > cumulative
    k = int(ks[support].max())
    tau = (cumulative[k - 1] - 1) / k
    return torch.clamp(x - tau, min=0)


def test_weights_are_the_simplex_projection_and_padding_is_never_in_the_support():
    torch.manual_seed(0)
    for gamma in (0.3, 1.0, 3.0):
        selector = SparseAttentionSelector(5, gamma=gamma).double()
        states = torch.randn(3, 8, 5, dtype=torch.float64)
        mask = torch.ones(3, 8, dtype=torch.float64)
        mask[1, 5:] = 0
        alpha = selector.attention(states, mask)
        logits = selector.score(torch.tanh(selector.project(states))).squeeze(-1)
        for row, n in enumerate([8, 5, 8]):
            expected = sparsemax_reference(logits[row, :n].detach() / gamma)
            assert torch.allclose(alpha[row, :n].detach(), expected, atol=1e-10)
            assert alpha[row].sum().item() == 1.0 or abs(alpha[row].sum().item() - 1) < 1e-10
        assert torch.all(alpha[1, 5:] == 0)


def test_rationale_is_the_support_and_larger_gamma_is_denser():
    torch.manual_seed(1)
    states, mask = torch.randn(4, 20, 6), torch.ones(4, 20)
    sparse = SparseAttentionSelector(6, gamma=0.1)
    dense = SparseAttentionSelector(6, gamma=10.0)
    dense.load_state_dict(sparse.state_dict())
    z_sparse, z_dense = sparse.decode(states, mask), dense.decode(states, mask)
    assert torch.equal(z_sparse > 0, sparse.attention(states, mask) > 0)
    assert (z_sparse > 0).sum() < (z_dense > 0).sum()
    assert torch.allclose(z_sparse.amax(-1), torch.ones(4))


def test_gradients_flow_through_the_support():
    torch.manual_seed(2)
    selector = SparseAttentionSelector(4, gamma=2.0)
    states = torch.randn(2, 6, 4, requires_grad=True)
    selection = selector(states, torch.ones(2, 6))
    selection.masks.sum().backward()
    assert torch.isfinite(states.grad).all() and states.grad.abs().sum() > 0
