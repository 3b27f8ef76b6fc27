"""The training convolutions over packed rows (rationale_cli.models.encoders.convolution) against PyTorch's
Conv1d, ReLU and mask under autograd."""

from __future__ import annotations

import pytest
import torch

from rationale_cli.models.encoders.convolution import Packed


def plain(convs, x: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    for conv in convs:
        x = torch.relu(conv(x.transpose(1, 2)).transpose(1, 2)) * real
    return x


def batch(B: int, T: int, In: int, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs zero where ``real`` is 0 (as the encoders give them), with padding, one empty row,
    one full row and positions inside a document that are not real (a mask with holes)."""
    lengths = torch.randint(1, T + 1, (B,))
    lengths[0], lengths[-1] = 0, T
    real = torch.arange(T) < lengths[:, None]
    if T > 2:
        real[-1, 1] = False
    real = real.to(dtype).unsqueeze(-1)
    return torch.randn(B, T, In, dtype=dtype) * real, real


@pytest.mark.parametrize("kernel_size,length,pad", [(1, 7, 0), (1, 7, 1), (3, 1, 1), (3, 9, 1), (3, 9, 2),
                                                    (5, 2, 2), (5, 12, 2)])
def test_values_and_gradients_equal_conv1d(kernel_size, length, pad):
    torch.manual_seed(kernel_size * 31 + length + pad)
    convs = [torch.nn.Conv1d(6, 5, kernel_size, padding=kernel_size // 2),
             torch.nn.Conv1d(5, 4, kernel_size, padding=kernel_size // 2)]
    raw, real = batch(4, length, 6)
    raw.requires_grad_(True)
    # masked, as the encoders give it: no gradient to read from where it is 0
    expected = plain(convs, raw * real, real)
    got = Packed(real[..., 0] > 0, pad).convolved(convs, raw * real)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    grad = torch.randn_like(expected)
    weights = [p for conv in convs for p in conv.parameters()]
    wanted = torch.autograd.grad(expected, [raw, *weights], grad)
    given = torch.autograd.grad(got, [raw, *weights], grad)
    for a, b in zip(given, wanted):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_gradcheck_in_float64():
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(3, 4, 3, padding=1).double()
    x, real = batch(3, 5, 3, torch.float64)
    x.requires_grad_(True)
    packed = Packed(real[..., 0] > 0, 1)

    def run(x, weight, bias):
        view = torch.nn.Conv1d(3, 4, 3, padding=1)
        view.weight, view.bias = weight, bias
        return packed.convolved([view], x * real)
    assert torch.autograd.gradcheck(run, (x, conv.weight, conv.bias))


def test_an_input_without_gradient_gets_none_and_the_weights_theirs():
    torch.manual_seed(1)
    conv = torch.nn.Conv1d(4, 3, 3, padding=1)
    x, real = batch(3, 6, 4)
    Packed(real[..., 0] > 0, 1).convolved([conv], x).sum().backward()
    expected = torch.autograd.grad(plain([conv], x, real).sum(), [conv.weight, conv.bias])
    torch.testing.assert_close(conv.weight.grad, expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(conv.bias.grad, expected[1], atol=1e-5, rtol=1e-5)
    assert x.grad is None


def test_packing_keeps_each_document_up_to_its_last_real_row_between_zero_rows():
    real = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]]).bool()
    packed = Packed(real, 2)
    assert packed.rows == 2 + (2 + 2) + (0 + 2) + (3 + 2) + (4 + 2)
    x = torch.arange(1, 17.0).view(4, 4, 1) * real.unsqueeze(-1)
    rows = packed.pack(x)[:, 0]
    assert rows.tolist() == [0, 0, 1, 2, 0, 0, 0, 0, 9, 0, 11, 0, 0, 13, 14, 15, 16, 0, 0]
    assert packed.real[:, 0].tolist() == [r != 0 for r in rows.tolist()]
    assert torch.equal(packed.unpack(packed.pack(x)), x)
    documents = packed.document.tolist()
    assert [documents[i] for i in (2, 3, 8, 10, 13, 16)] == [0, 0, 2, 2, 3, 3]


def test_no_steps():
    conv = torch.nn.Conv1d(4, 3, 3, padding=1)
    x = torch.zeros(2, 0, 4, requires_grad=True)
    assert Packed(torch.zeros(2, 0, dtype=torch.bool), 1).convolved([conv], x).shape == (2, 0, 3)


def test_l2x_on_packed_rows_equals_its_equations_with_conv1d():
    """The L2X selector network (rationale_cli.models.encoders.l2x) against its docstring's equations written
    with Conv1d over padded [B, H, T] inputs, values and gradients."""
    from rationale_cli.models.encoders.l2x import L2XEncoder

    torch.manual_seed(3)
    encoder = L2XEncoder(5, 4, dropout=0.0).train()
    raw, real = batch(4, 9, 5)
    mask = real[..., 0]
    raw.requires_grad_(True)

    def reference(x):
        r = mask.unsqueeze(1)  # [B, 1, T]
        h = torch.relu(encoder.first((x * mask.unsqueeze(-1)).transpose(1, 2))) * r
        global_info = torch.relu(encoder.global_layer(h.max(-1).values))
        local = h
        for conv in encoder.local:
            local = torch.relu(conv(local)) * r
        both = torch.cat([global_info.unsqueeze(-1).expand_as(local), local], 1)
        states = (torch.relu(encoder.combine(both)) * r).transpose(1, 2)
        return states, states.max(1).values

    expected, got = reference(raw), encoder(raw, mask)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    grad = torch.randn_like(expected[0])
    weights = list(encoder.parameters())
    wanted = torch.autograd.grad((expected[0] * grad).sum() + expected[1].sum(), [raw, *weights])
    given = torch.autograd.grad((got[0] * grad).sum() + got[1].sum(), [raw, *weights])
    for a, b in zip(given, wanted):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
