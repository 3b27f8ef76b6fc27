"""Sparse attention rationales: sparsemax against its KKT conditions, padding, support."""

import re

import pytest
import torch
from helpers import train_on_demo

from rationale_cli.models.options import OptionError
from rationale_cli.models.selectors.attention.sparse_attention import SparseAttentionSelector
from rationale_cli.runs.flags import option_line


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


def test_fusedmax_and_oscarmax_options_and_padding():
    torch.manual_seed(3)
    states = torch.randn(2, 9, 5, dtype=torch.float64)
    mask = torch.ones(2, 9, dtype=torch.float64)
    mask[1, 6:] = 0
    for attention, lam in (("fusedmax", 0.1), ("oscarmax", 0.01)):
        selector = SparseAttentionSelector(5, attention=attention).double()
        assert selector.lam == lam
        alpha = selector.attention(states, mask)
        assert torch.allclose(alpha.sum(-1), torch.ones(2, dtype=torch.float64))
        assert torch.all(alpha[1, 6:] == 0)
    # the errors as the command line words them (rationale_cli.runs.flags spells the options)
    with pytest.raises(OptionError) as raised:
        SparseAttentionSelector(5, attention="softmax")
    assert re.search("--attention softmax: expected one of sparsemax", option_line(raised.value))
    with pytest.raises(OptionError) as raised:
        SparseAttentionSelector(5, attention="fusedmax", lam=-1.0)
    assert re.search("lambda", option_line(raised.value))


def test_a_large_lambda_fuses_fusedmax_into_one_contiguous_segment():
    torch.manual_seed(4)
    selector = SparseAttentionSelector(5, attention="fusedmax", lam=50.0)
    alpha = selector.attention(torch.randn(1, 12, 5), torch.ones(1, 12))
    support = (alpha[0] > 0).nonzero().flatten().tolist()
    assert support == list(range(support[0], support[-1] + 1))


@pytest.mark.slow
def test_fusedmax_on_the_demo_corpus_is_precise(tmp_path):
    test = train_on_demo(tmp_path, "--extractor", "sparse-attention", "--attention", "fusedmax",
                         "--encoder", "rcnn", "--epochs", "5")
    assert test["precision"] > 0.85, test
