"""The HardKuma distribution (Bastings et al., 2019, section 3 and appendix A).

K ~ Kuma(a, b) on (0, 1) has cdf ``F_K(k) = 1 - (1 - k^a)^b`` and inverse cdf
``F_K^-1(u) = (1 - (1 - u)^(1/b))^(1/a)`` (eq. 5). Stretched to (l, r) with
``t = l + (r - l) k`` (eq. 7) and rectified, ``h = min(1, max(0, t))`` (eq. 10c),
it puts mass on exactly 0 and exactly 1 (eqs. 8-9):

    P(H = 0) = F_K(-l / (r - l)),    P(H = 1) = 1 - F_K((1 - l) / (r - l)).

Every cdf term is computed in log space: the survival function is
``log(1 - F_K(x)) = b * log(1 - x^a)`` with ``log(1 - x^a) = log(-expm1(a log x))``,
so a and b anywhere in [1e-6, 100] give finite values and gradients.

For a selection rate t, :func:`shapes_at_rate` inverts eq. 8 for b: the expected L0
(eq. 11) per token is ``P(H != 0) = (1 - k0^a)^b`` with ``k0 = -l / (r - l)``, so
``b = log t / log(1 - k0^a)``.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

A_MIN, A_MAX = 1e-6, 100.0
LOW, HIGH = -0.1, 1.1  # the stretched support (l, r) of Bastings et al. (2019)
EPS = 1e-6


def log1mexp(x: Tensor) -> Tensor:
    """``log(1 - exp(x))`` for ``x < 0``, accurate near 0 and for very negative x.

    Each branch only sees inputs where it is used, so the other branch's
    infinite gradient never turns into NaN.
    """
    x = x.clamp(max=-1e-30)
    near = x > -math.log(2.0)
    near_zero = torch.log(-torch.expm1(torch.where(near, x, torch.full_like(x, -1.0))))
    far = torch.log1p(-torch.exp(torch.where(near, torch.full_like(x, -1.0), x)))
    return torch.where(near, near_zero, far)


class HardKuma:
    """HardKuma(a, b, l, r) with elementwise parameters (l, r default (-0.1, 1.1)). The
    log-probabilities of the atoms are computed once per object (training's penalties and
    test-time decoding each ask for them several times)."""

    def __init__(self, a: Tensor, b: Tensor, l: float = LOW, r: float = HIGH):
        if not (l < 0.0 and r > 1.0):
            raise ValueError(f"HardKuma needs l < 0 < 1 < r, got ({l}, {r})")
        self.a = a.clamp(A_MIN, A_MAX)
        self.b = b.clamp(A_MIN, A_MAX)
        self.l, self.r = l, r

    def stretch(self, h: float) -> float:
        """The Kumaraswamy argument k with ``l + (r - l) k = h``."""
        return (h - self.l) / (self.r - self.l)

    def log_survival_k(self, k: float | Tensor) -> Tensor:
        """``log(1 - F_K(k))`` for k in (0, 1)."""
        return log_survival(self.a, self.b, k)

    def log_cdf_k(self, k: float | Tensor) -> Tensor:
        return log1mexp(self.log_survival_k(k))

    def cdf(self, h: float | Tensor) -> Tensor:
        """P(H <= h) for h in [0, 1) (the rectified variable's cdf, with its atom at 0)."""
        k = torch.as_tensor(self.stretch(h), dtype=self.a.dtype, device=self.a.device)
        return torch.exp(self.log_cdf_k(k))

    def log_p0(self) -> Tensor:
        """log P(H = 0) (eq. 8)."""
        return log1mexp(self.log_p_nonzero())

    def log_p_nonzero(self) -> Tensor:
        """log P(H != 0) = b log(1 - k0^a): the expected-L0 term of eq. 11."""
        return self._log_p_nonzero

    def log_p1(self) -> Tensor:
        """log P(H = 1) (eq. 9)."""
        return self._log_p1

    @functools.cached_property
    def _log_p_nonzero(self) -> Tensor:
        return self.log_survival_k(self.stretch(0.0))

    @functools.cached_property
    def _log_p1(self) -> Tensor:
        return self.log_survival_k(self.stretch(1.0))

    def p0(self) -> Tensor:
        return torch.exp(self.log_p0())

    def p_nonzero(self) -> Tensor:
        return torch.exp(self.log_p_nonzero())

    def p1(self) -> Tensor:
        return torch.exp(self.log_p1())

    def p_continuous(self) -> Tensor:
        """P(0 < H < 1) = P(H != 0) - P(H = 1)."""
        return (self.p_nonzero() - self.p1()).clamp_min(0.0)

    def rsample(self, generator: torch.Generator | None = None) -> Tensor:
        """A reparameterized sample (eqs. 10a-10c), u ~ U(EPS, 1 - EPS)."""
        u = torch.rand(self.a.shape, generator=generator, dtype=self.a.dtype, device=self.a.device)
        u = u * (1 - 2 * EPS) + EPS
        # k = (1 - (1 - u)^(1/b))^(1/a), in log space
        log_k = log1mexp(torch.log1p(-u) / self.b) / self.a
        t = self.l + (self.r - self.l) * torch.exp(log_k)
        return t.clamp(0.0, 1.0)

    def mean_nodes(self, nodes: int = 64) -> tuple[Tensor, Tensor]:
        """Nodes k and weights w of :meth:`mean`, ``E[H] = (r - l) sum_i w_i (1 - k_i^a)^b``
        (Gauss-Legendre on the stretched [0, 1]), in the shapes' dtype and device."""
        x, w = gauss_legendre(nodes)
        k0, k1 = self.stretch(0.0), self.stretch(1.0)
        k = torch.as_tensor(0.5 * (k1 - k0) * x + 0.5 * (k1 + k0), dtype=self.a.dtype, device=self.a.device)
        return k, torch.as_tensor(0.5 * (k1 - k0) * w, dtype=self.a.dtype, device=self.a.device)

    def mean(self, nodes: int = 64) -> Tensor:
        """E[H] of the rectified variable: ``int_0^1 P(H > h) dh``, by Gauss-Legendre
        quadrature in the Kumaraswamy coordinate, ``(r - l) int_{k0}^{k1} (1 - k^a)^b dk``."""
        k, w = self.mean_nodes(nodes)
        survival = torch.exp(log_survival(self.a.unsqueeze(-1), self.b.unsqueeze(-1), k))
        return (self.r - self.l) * (survival * w).sum(-1)


@functools.cache
def gauss_legendre(nodes: int):
    """Gauss-Legendre nodes and weights on [-1, 1] (an eigenproblem: computed once per size)."""
    import numpy as np

    return np.polynomial.legendre.leggauss(nodes)


def shapes_at_rate(rate: float, a: float = math.log(2.0), l: float = LOW, r: float = HIGH) -> tuple[float, float]:
    """Shapes ``(a, b)`` with ``P(H != 0) = rate`` (eq. 8: ``(1 - k0^a)^b = rate``, ``k0 = -l / (r - l)``)
    for the given a; the default ``ln 2 = softplus(0)``. b is clamped to the shapes' range."""
    k0 = -l / (r - l)
    b = math.log(rate) / math.log1p(-(k0**a))
    return a, min(max(b, A_MIN), A_MAX)


def log_survival(a: Tensor, b: Tensor, k: float | Tensor) -> Tensor:
    """``log(1 - F_K(k; a, b)) = b log(1 - k^a)``, broadcasting k against a and b."""
    log_k = torch.log(torch.as_tensor(k, dtype=a.dtype, device=a.device))
    return b * log1mexp(a * log_k)
