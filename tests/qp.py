"""A small dense quadratic-program solver for checking exact maps against their
definitions: ``min 1/2 v'Pv + q'v  s.t.  Gv <= h, Av = b`` by a primal-dual
interior-point method (Newton steps on the perturbed KKT conditions), in float64."""

from __future__ import annotations

import numpy as np


def solve_qp(P, q, G, h, A=None, b=None, iterations: int = 200, tol: float = 1e-12):
    n, m = len(q), len(h)
    A = np.zeros((0, n)) if A is None else np.asarray(A, float)
    b = np.zeros(0) if b is None else np.asarray(b, float)
    v, s, z, y = np.zeros(n), np.ones(m), np.ones(m), np.zeros(len(b))
    for _ in range(iterations):
        r_dual = P @ v + q + G.T @ z + A.T @ y
        r_eq, r_in = A @ v - b, G @ v + s - h
        mu = s @ z / m
        if max(np.abs(r_dual).max(), np.abs(r_eq).max(initial=0), np.abs(r_in).max(), mu) < tol:
            break
        r_cent = 0.1 * mu - s * z
        w = z / s
        kkt = np.block([[P + G.T @ (w[:, None] * G), A.T], [A, np.zeros((len(b), len(b)))]])
        rhs = np.concatenate([-r_dual - G.T @ ((r_cent + z * r_in) / s), -r_eq])
        step = np.linalg.solve(kkt, rhs)
        dv, dy = step[:n], step[n:]
        dz = (r_cent + z * r_in + z * (G @ dv)) / s
        ds = -r_in - G @ dv
        alpha = 1.0
        for value, delta in ((s, ds), (z, dz)):
            shrinking = delta < 0
            if shrinking.any():
                alpha = min(alpha, 0.99 * float(np.min(-value[shrinking] / delta[shrinking])))
        v, s, z, y = v + alpha * dv, s + alpha * ds, z + alpha * dz, y + alpha * dy
    return v


def prox_by_qp(x, lam, penalty: str, simplex: bool):
    """``argmin_y 1/2 ||y - x||^2 + lam R(y)`` (over the simplex if asked), with R the 1-d
    total variation (``tv``), OSCAR (``oscar``) or nothing (``none``), through epigraph
    variables t: ``R = sum t`` with ``t >= |y_{i+1} - y_i|`` or ``t_ij >= |y_i|, |y_j|``."""
    x = np.asarray(x, float)
    d = len(x)
    if penalty == "tv":
        pairs = [(i, i + 1) for i in range(d - 1)]
    elif penalty == "oscar":
        pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    else:
        pairs = []
    k = len(pairs)
    P = np.zeros((d + k, d + k))
    P[:d, :d] = np.eye(d)
    q = np.concatenate([-x, np.full(k, lam)])
    rows = []
    for p, (i, j) in enumerate(pairs):
        for sign in (1.0, -1.0):
            if penalty == "tv":  # +-(y_j - y_i) <= t
                row = np.zeros(d + k)
                row[j], row[i], row[d + p] = sign, -sign, -1.0
                rows.append(row)
            else:  # +-y_i <= t and +-y_j <= t
                for index in (i, j):
                    row = np.zeros(d + k)
                    row[index], row[d + p] = sign, -1.0
                    rows.append(row)
    if simplex:
        for i in range(d):
            row = np.zeros(d + k)
            row[i] = -1.0
            rows.append(row)
    G = np.array(rows) if rows else np.zeros((0, d + k))
    h = np.zeros(len(rows))
    A = b = None
    if simplex:
        A, b = np.concatenate([np.ones(d), np.zeros(k)])[None, :], np.ones(1)
    if len(rows) == 0:  # unconstrained: the identity map
        return x.copy()
    return solve_qp(P, q, G, h, A, b)[:d]
