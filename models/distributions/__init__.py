"""Distributions over rationale masks."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor


def gradient_of(log_partition: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """``d sum(log_partition(x)) / dx``: marginals of an exponential family as the gradient
    of its log-partition. Differentiable (``create_graph``) when grad mode is on and x
    requires grad; otherwise computed on a detached copy, also under ``no_grad``."""
    differentiable = torch.is_grad_enabled() and x.requires_grad
    with torch.enable_grad():
        leaf = x if differentiable else x.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(log_partition(leaf).sum(), leaf, create_graph=differentiable)
    return grad
