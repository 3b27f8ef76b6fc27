"""Masks of a chain of tokens with a fixed or capped count of ones: the one distribution
behind SIMPLE, the top-k relaxations, top-k sparsemax and SparseMAP's oracle.

Each mask z of a document scores ``<u, z> + sum_i w_i z_i z_{i+1}`` (unary utilities
``u [B, T]``, optional pairwise utilities ``w [B, T-1]`` rewarding adjacent selected
tokens), over the masks with exactly k ones, or at most k (``at_most``); the
distribution is ``p(z) ~ exp(score(z))``.

- Exactly k without pairwise terms is the k-subset distribution of SIMPLE
  (Ahmed et al., 2023, sections 2-3, appendix A; :mod:`rationale_cli.models.distributions.ksubset`).
- With pairwise terms it is the correlated k-subset of Paulus et al. (2020, appendix
  B.5): the embedding ``x in {0, 1}^(2n-1)`` holds the token indicators and
  ``z_i z_{i+1}`` (eq. 44); its marginals are their relaxed k-subset (section 3).
- At most k: the masks of top-k sparsemax and SparseMAP (Correia et al., 2020,
  section 4, appendix C).

Everything is one dynamic program over (count, last bit), in two exact forms
(``method``): on a CPU the sequential program of :mod:`rationale_cli.models.distributions.chain_dp`
with its explicit backward pass, elsewhere the log-depth program of
:mod:`rationale_cli.models.distributions.subset_tree` (ceil(log2 T) vectorized steps, derivatives by
autograd); the argmax and the K best masks are its max and K-max reductions.
Marginals are ``dA/du`` (Theorem 1 of SIMPLE), differentiable, and their Jacobian is
``Cov(z)``. Padding is never selectable, pairwise utilities next to it are ignored,
and a document shorter than k selects all of its tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rationale_cli.models.budget import top_k_mask
from rationale_cli.models.distributions import chain_dp, gradient_of
from rationale_cli.models.distributions.base import MaskDistribution
from rationale_cli.models.distributions.subset_tree import (
    NEG,
    best,
    boundary_utilities,
    leaves,
    log_sum,
    root_value,
    up_sweep,
)

METHODS = ("auto", "sequential", "tree")


def resolve_method(method: str, x: Tensor) -> str:
    """``auto``: the sequential program on a CPU, the log-depth tree elsewhere (GPUs)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method == "auto":
        return "sequential" if x.device.type == "cpu" else "tree"
    return method


class ChainKSubset(MaskDistribution):
    """Masks with exactly ``k`` ones (an int or a [B] tensor), or at most ``k`` with
    ``at_most``, scored by ``unary [B, T]`` and ``pairwise [B, T-1]`` (or None)."""

    def __init__(self, unary: Tensor, mask: Tensor, k: int | Tensor, pairwise: Tensor | None = None, *,
                 at_most: bool = False, method: str = "auto"):
        self.unary, self.pairwise, self.mask, self.at_most = unary, pairwise, mask, at_most
        self.method = resolve_method(method, unary)
        lengths = mask.sum(-1).long()
        k = torch.as_tensor(k, device=unary.device).long().expand(lengths.shape)
        self.k = torch.minimum(k, lengths)
        self.max_k = int(self.k.max()) if self.k.numel() else 0
        self.ends = chain_dp.accepted_counts(self.k, self.max_k, at_most)

    def program_inputs(self) -> tuple[Tensor, Tensor | None]:
        """The sequential program's utilities ``[B, T]`` (padding impossible) and links
        ``[B, T]`` (w_i couples tokens i-1 and i; none next to padding)."""
        u = self.unary.masked_fill(self.mask <= 0, NEG)
        if self.pairwise is None:
            return u, None
        return u, F.pad(boundary_utilities(self.pairwise, self.mask, self.mask.shape[1]), (1, 0))

    def one_pass(self, draws: Tensor | None = None) -> Tensor:
        """The sequential program: keeps the log-partition and the marginals; returns the
        sample drawn from uniform ``draws [B, T+1]`` (empty without draws)."""
        u, w = self.program_inputs()
        log_z, mu, z = chain_dp.chain_marginals(u, w, self.ends, self.max_k, draws)
        self.keep(log_partition=log_z, marginals=mu * self.mask)
        return z

    def tree_value(self, unary: Tensor, pairwise: Tensor | None, reduce) -> Tensor:
        """``reduce_z score(z)`` per row [B] by the log-depth program."""
        table = leaves(unary, self.mask, 1 if pairwise is None else 2)
        links = None if pairwise is None else boundary_utilities(pairwise, self.mask, table.shape[1])
        return root_value(up_sweep(table, links, self.max_k, reduce)[-1], self.k, reduce, self.at_most)

    def compute_log_partition(self) -> Tensor:
        if self.method == "sequential":
            self.one_pass()
            return self.log_partition
        return self.tree_value(self.unary, self.pairwise, log_sum)

    def compute_marginals(self) -> Tensor:
        if self.method == "sequential":
            self.one_pass()
            return self.marginals
        return gradient_of(lambda u: self.tree_value(u, self.pairwise, log_sum), self.unary) * self.mask

    def pair_marginals(self) -> Tensor:
        """``P(z_i = 1, z_{i+1} = 1)`` [B, T-1] = ``dA / dw``; differentiable on the tree."""
        return gradient_of(lambda w: self.tree_value(self.unary, w, log_sum), self.pairwise)

    def score(self, z: Tensor) -> Tensor:
        """``<u, z> + sum_i w_i z_i z_{i+1}`` over real tokens (not checked against the count),
        of masks ``z [B, T]`` or of several per row, ``z [B, S, T]``."""
        def per_row(t: Tensor) -> Tensor:
            return t if z.dim() == 2 else t.unsqueeze(1)

        z = z * per_row(self.mask)
        total = (z * per_row(self.unary)).sum(-1)
        if self.pairwise is not None:
            total = total + (z[..., 1:] * z[..., :-1] * per_row(self.pairwise)).sum(-1)
        return total

    def compute_entropy(self) -> Tensor:
        """``H = A - E[score(z)]``, since ``log p(z) = score(z) - A``."""
        expected = (self.marginals * self.unary * self.mask).sum(-1)
        if self.pairwise is not None:
            expected = expected + (self.pair_marginals() * self.pairwise).sum(-1)
        return self.log_partition - expected

    def kl_uniform(self) -> Tensor:
        """KL(p || uniform over the k-subsets) = log C(n, k) - H (SIMPLE, Proposition 4)."""
        if self.at_most:
            raise ValueError("the uniform reference is over the subsets of exactly k")
        n = self.mask.sum(-1)
        k = self.k.to(n.dtype)
        return torch.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1) - self.entropy

    def compute_argmax(self) -> Tensor:
        """The best mask; without pairwise terms the max program's closed form, the k
        highest utilities (only the positive ones under a cap), ties to the earlier position."""
        if self.pairwise is None:
            best_k = top_k_mask(self.unary, self.mask, self.k)
            return best_k * (self.unary > 0) if self.at_most else best_k
        if self.method == "sequential":
            u, w = (t.detach().t().contiguous() for t in self.program_inputs())
            alpha, pointers = chain_dp.forward_table(u, w, self.max_k, chain_dp.Max())
            return chain_dp.best_mask(alpha, pointers, self.ends) * self.mask
        return gradient_of(lambda u: self.tree_value(u, self.pairwise, best), self.unary) * self.mask

    @torch.no_grad()
    def topk(self, count: int) -> tuple[Tensor, Tensor]:
        """The ``count`` best masks ``[B, count, T]`` and their scores ``[B, count]``, best
        first, by the K-max program (``NEG`` scores where a row has fewer masks)."""
        u, w = self.program_inputs()
        alpha, pointers = chain_dp.forward_table(u.t().contiguous(), None if w is None else w.t().contiguous(),
                                                 self.max_k, chain_dp.KMax(count))
        masks, scores = chain_dp.best_masks(alpha, pointers, self.ends, count)
        return masks * self.mask.unsqueeze(1), scores

    def sample(self, generator: torch.Generator | None = None) -> Tensor:
        """An exact sample [B, T]. Sequentially (Algorithm 2, in the pass that gives the
        marginals when they are not known yet), or on the tree for exactly k without
        pairwise terms (Algorithm 6): from the root down, each segment with m ones gives j
        of them to its left half with probability ``exp(L_j + R_{m-j}) / exp(S_m)``."""
        if self.method == "tree" and self.pairwise is None and not self.at_most:
            return self.tree_sample(generator)
        batch, length = self.mask.shape
        draws = torch.rand(batch, length + 1, generator=generator, device=self.unary.device, dtype=self.unary.dtype)
        if self.method == "sequential" and not self.is_cached("marginals"):
            return self.one_pass(draws) * self.mask
        with torch.no_grad():
            u, w = (t.detach().t().contiguous() if t is not None else None for t in self.program_inputs())
            alpha = chain_dp.forward_table(u, w, self.max_k)[0]
            return chain_dp.walk_back(alpha, u, w, self.ends, draws.t()).t() * self.mask

    @torch.no_grad()
    def tree_sample(self, generator: torch.Generator | None) -> Tensor:
        levels = up_sweep(leaves(self.unary, self.mask, 1), None, self.max_k, log_sum)
        counts = self.k.unsqueeze(1)  # [B, segments]
        for table in reversed(levels[:-1]):
            left, right = table[:, 0::2, 0, 0], table[:, 1::2, 0, 0]  # [B, S, D]
            rest = counts.unsqueeze(-1) - torch.arange(left.shape[-1], device=counts.device)
            fits = (rest >= 0) & (rest < right.shape[-1])
            scores = left + right.gather(-1, rest.clamp(0, right.shape[-1] - 1))
            u = torch.rand(scores.shape, generator=generator, device=scores.device, dtype=scores.dtype)
            noisy = scores - torch.log(-torch.log(u.clamp(1e-12, 1 - 1e-7)))  # Gumbel-max
            j = noisy.masked_fill(~fits, float("-inf")).argmax(-1)
            counts = torch.stack([j, counts - j], -1).flatten(1)
        return counts[:, : self.mask.shape[1]].to(self.unary.dtype) * self.mask
