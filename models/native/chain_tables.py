"""The log-semiring loops of :mod:`rationale_cli.models.distributions.chain_dp` compiled (``chain_tables.c``):
its forward and backward tables and its prefix and suffix expectations, one pass per token
instead of a few PyTorch operations each (about a twelfth of a top-k training step on beer),
the rows shared out over PyTorch's threads. Each function fills its table's loop in place and
says whether it ran; where it cannot (not float32 on the CPU, no compiler), the callers run
their PyTorch loops."""

from __future__ import annotations

import functools

from torch import Tensor

from rationale_cli.models.native import INT, POINTER, declared, library, over_rows, pointers, usable

NAME = "chain_tables"


@functools.cache
def _loops():
    lib = library(NAME)
    return {name: declared(lib, name, *[INT] * 6, *[POINTER] * operands)
            for name, operands in (("chain_forward", 3), ("chain_backward", 3), ("chain_prefix", 4),
                                   ("chain_suffix", 3))}


def _run(name: str, table: Tensor, *inputs: Tensor | None) -> bool:
    present = [x for x in inputs if x is not None]
    if not usable(NAME, table, *present) or not all(x.is_contiguous() for x in (table, *present)):
        return False
    steps, counts, bits, batch = table.shape
    loop = _loops()[name]
    addresses = [0 if x is None else x.data_ptr() for x in inputs] + pointers(table)
    over_rows(lambda first, count: loop(steps - 1, counts, bits, batch, first, count, *addresses), batch)
    return True


def forward_log(u: Tensor, linked: Tensor | None, alpha: Tensor) -> bool:
    """:func:`~rationale_cli.models.distributions.chain_dp.forward_table`'s loop in ``alpha [T+1, K+2, A, B]``
    (its first step and guard rows filled), ``u [T, B]``, ``linked = w + u`` or None."""
    return _run("chain_forward", alpha, u, linked)


def backward_log(u: Tensor, w: Tensor | None, beta: Tensor) -> bool:
    """:func:`~rationale_cli.models.distributions.chain_dp.backward_table`'s loop in ``beta`` (its last step filled)."""
    return _run("chain_backward", beta, u, w)


def prefix(first: Tensor, second: Tensor | None, g: Tensor, ra: Tensor) -> bool:
    """:func:`~rationale_cli.models.distributions.chain_dp.prefix_expectations`' loop in ``ra`` (zeros), from
    its transition probabilities ``[T, K+1, B]`` (one, or two with pairwise terms)."""
    return _run("chain_prefix", ra, first, second, g)


def suffix(goes_on: Tensor, g: Tensor, rb: Tensor) -> bool:
    """:func:`~rationale_cli.models.distributions.chain_dp.suffix_expectations`' loop in ``rb`` (zeros), from
    ``goes_on [T, K+1, A, B]``."""
    return _run("chain_suffix", rb, goes_on, g)
