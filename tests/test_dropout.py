"""The hashed dropout (rationale_cli.models.native.dropout): its mask is the hash it documents (checked
against the same hash in numpy's wrapping uint32 arithmetic), keeps each element with
probability 1 - p independently of its neighbours, scales as torch.nn.Dropout does, applies
the same mask to the gradient, and is fixed by the seed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rationale_cli.models.native as native
from rationale_cli.models.native.dropout import Dropout, dropped

pytestmark = pytest.mark.skipif(native.library("dropout") is None, reason="no C compiler here")


def mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def test_the_mask_is_the_documented_hash_of_the_index_and_the_keys():
    x = torch.randn(3, 1000, 7)
    keys, p = (2**32 - 5, 12345), 0.3
    i = np.arange(x.numel(), dtype=np.uint64)
    low, high = (i & np.uint64(0xFFFFFFFF)).astype(np.uint32), (i >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):
        h = mix(mix(low ^ np.uint32(keys[0])) ^ high ^ np.uint32(keys[1]))
    kept = torch.from_numpy(h >= np.uint32(round(p * 2**32))).view(x.shape)
    scale = torch.tensor(1 / (1 - p), dtype=torch.float32)
    assert torch.equal(dropped(x, keys, p), torch.where(kept, x * scale, 0.0))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_each_element_is_kept_with_probability_one_minus_p_independently_of_its_neighbour(p):
    torch.manual_seed(0)
    layer = Dropout(p).train()
    kept = layer(torch.ones(2_000_000)) != 0
    n, q = kept.numel(), 1 - p
    assert abs(kept.float().mean().item() - q) < 5 * (q * p / n) ** 0.5
    both = (kept[:-1] & kept[1:]).float().mean().item()
    assert abs(both - q * q) < 5 * (q * q * (1 - q * q) / n) ** 0.5
    far = (kept[: n // 2] & kept[n // 2 :]).float().mean().item()
    assert abs(far - q * q) < 5 * (q * q * (1 - q * q) / (n // 2)) ** 0.5


def test_kept_elements_are_scaled_as_torch_scales_them_and_the_gradient_has_the_same_mask():
    torch.manual_seed(1)
    x = torch.randn(5, 40, 8, requires_grad=True)
    layer = Dropout(0.25).train()
    y = layer(x.transpose(0, 1))  # a strided input
    kept = y != 0
    torch.manual_seed(2)
    ones = torch.ones(10_000)
    scale = torch.nn.functional.dropout(ones, 0.25, training=True).max()  # how torch scales what it keeps
    assert torch.equal(y[kept], x.transpose(0, 1)[kept] * scale)
    g = torch.randn_like(y)
    y.backward(g)
    assert torch.equal(x.grad.transpose(0, 1), torch.where(kept, g * scale, 0.0))


def test_the_seed_fixes_the_masks_and_outside_training_or_at_p_0_or_1_it_is_torch_dropout():
    layer = Dropout(0.5).train()
    x = torch.randn(100, 30)
    torch.manual_seed(7)
    a, b = layer(x), layer(x)
    torch.manual_seed(7)
    assert torch.equal(layer(x), a) and not torch.equal(a, b)
    assert torch.equal(layer.eval()(x), x)
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))
    assert torch.equal(Dropout(0.0).train()(x), x)
    double = x.double()
    torch.manual_seed(7)
    reference = torch.nn.functional.dropout(double, 0.5, training=True)
    torch.manual_seed(7)
    assert torch.equal(layer.train()(double), reference)  # float64: torch's own
