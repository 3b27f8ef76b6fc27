"""Masked recurrences (the time loops) of the RCNN and LSTM encoders, with hand-written backward passes.

Layout shared by both cells -- direction-major, directions stacked so that one
loop step advances all of them with one batched matmul:

    P  [D, T, B, G*H]  input projections ``W x_t + b`` of all steps, computed
                       before the loop with one matmul (direction 1, if any,
                       already reversed in time)
    M  [D, T, B, 1]    gate m_t in [0, 1] (padding mask times rationale z)
    U  [D, H, G'*H]    recurrent weights, applied as ``h_{t-1} @ U``
    -> h [D, T, B, H]  state after every step (zero initial state)

Every cell is *gated by the mask*: with ``s'_t = cell(s_{t-1}, x_t)`` for the
whole state tuple s (h and the memory cells),

    s_t = m_t * s'_t + (1 - m_t) * s_{t-1},

so a step with m_t = 0 (padding, or a token the selector left out) carries the
state over unchanged -- Lei et al. (2016) and Bastings et al. (2019, Sec. 5,
``h_i = rnn(h_{i-1}, z_i e_i)``) skip unselected tokens this way -- and a
fractional m interpolates (relaxed selectors).

Why hand-written backward passes: the forward loop runs without an autograd
graph and keeps only what the backward needs (c's, gates; tanh values are
recomputed), the reverse loop does one ``baddbmm`` and a few in-place
elementwise ops per step, and the weight gradient ``dU = sum_t h_{t-1}^T dA_t``
is one matmul after the loop. Per-step states are separate tensors, not slices
of one freshly allocated buffer (whose pages fault in on every step). On
float32 CPU tensors the RCNN's elementwise work per step is one compiled pass
instead (:mod:`rationale_cli.models.native.rcnn`); these loops are its fallback, and the
plain-autograd twins (``*_scan_autograd``) the references the tests check
against (``benchmarks/encoder_speed.py`` times them). Only first-order
gradients are supported (``once_differentiable``). Under ``torch.no_grad`` (or
when nothing requires grad) the loops keep nothing per step.

tanh is computed as ``2 sigmoid(2x) - 1`` (:func:`_tanh_`): on this CPU build
``torch.tanh`` is ~6x slower than ``torch.sigmoid`` and the identity is exact
up to ~2e-7 absolute in float32.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rationale_cli.models.encoders.base import TokenRows
from rationale_cli.models.native.rcnn import compiled
from rationale_cli.models.native.rcnn import rcnn_backward as compiled_backward
from rationale_cli.models.native.rcnn import rcnn_forward as compiled_forward
from rationale_cli.models.native.token_rows import token_projections as gathered_projections

__all__ = [
    "lstm_scan",
    "lstm_scan_autograd",
    "merge_directions",
    "rcnn_scan",
    "rcnn_scan_autograd",
    "stack_directions",
]


def _tanh_(x: Tensor) -> Tensor:
    """In-place tanh(x) = 2 sigmoid(2x) - 1."""
    return torch.sigmoid(x.mul_(2), out=x).mul_(2).sub_(1)


# ---------------------------------------------------------------------------
# RCNN, bigram (Lei et al. 2016; Bastings et al. 2019, App. B.1.1):
#
#   lambda_t = sigmoid(W^l x_t + U^l h_{t-1} + b^l)
#   c1_t     = lambda_t * c1_{t-1} + (1 - lambda_t) * W1 x_t
#   c2_t     = lambda_t * c2_{t-1} + (1 - lambda_t) * (c1_{t-1} + W2 x_t)
#   h_t      = tanh(c2_t + b)
#
# P[..., :H] = W^l x + b^l, P[..., H:2H] = W1 x, P[..., 2H:] = W2 x; U = U^l.
# With r = 1 - lambda = sigmoid(-(P^l + h U)), e1 = W1x - c1, e2 = c1 + W2x - c2,
# d1 = r e1, d2 = r e2 (the unmasked updates), the gated step is
#   c1 <- c1 + m d1,   c2 <- c2 + m d2,   u = tanh(c2 + d2 + b),   h <- h + m (u - h).
# ---------------------------------------------------------------------------


def _rcnn_forward(P: Tensor, M: Tensor, U: Tensor, b: Tensor, store: bool):
    """The loop. Returns h of all steps and, with ``store``, the per-step
    (c1_t, c2_t, r_t) the backward needs (else empty lists)."""
    D, T, B, G = P.shape
    H = G // 3
    h = P.new_zeros(D, B, H)
    c1 = torch.zeros_like(h)
    c2 = torch.zeros_like(h)
    d1 = torch.empty_like(h)
    d2 = torch.empty_like(h)
    u = torch.empty_like(h)
    hs, c1s, c2s, rs = [], [], [], []
    for t in range(T):
        p = P[:, t]
        m = M[:, t]
        r = torch.baddbmm(p[..., :H], h, U, beta=-1, alpha=-1).sigmoid_()  # 1 - lambda_t
        torch.sub(p[..., H : 2 * H], c1, out=d1).mul_(r)
        torch.add(c1, p[..., 2 * H :], out=d2).sub_(c2).mul_(r)
        _tanh_(torch.add(c2, d2, out=u).add_(b))
        c1 = torch.addcmul(c1, m, d1)
        c2 = torch.addcmul(c2, m, d2)
        h = torch.addcmul(h, m, u.sub_(h))
        hs.append(h)
        if store:
            c1s.append(c1)
            c2s.append(c2)
            rs.append(r)
    return torch.stack(hs, 1), c1s, c2s, rs


def _rcnn_backward(
    gout: Tensor, P: Tensor, M: Tensor, U: Tensor, b: Tensor, out: Tensor, c1s: list, c2s: list, rs: list
):
    D, T, B, G = P.shape
    H = G // 3
    gP = torch.empty_like(P)
    gM = torch.empty_like(M)
    Ut_T = U.transpose(1, 2)
    keep = 1 - M
    gh = P.new_zeros(D, B, H)
    gc1 = torch.zeros_like(gh)
    gc2 = torch.zeros_like(gh)
    gb = torch.zeros_like(gh)  # sum over steps of dL/d(tanh argument); summed over B at the end
    zero = torch.zeros_like(gh)
    e1 = torch.empty_like(gh)
    e2 = torch.empty_like(gh)
    u = torch.empty_like(gh)
    gs = torch.empty_like(gh)
    gd1 = torch.empty_like(gh)
    tmp = torch.empty_like(gh)
    for t in range(T - 1, -1, -1):
        p = P[:, t]
        m = M[:, t]
        r = rs[t]
        c1 = c1s[t - 1] if t > 0 else zero  # state before step t
        c2 = c2s[t - 1] if t > 0 else zero
        h = out[:, t - 1] if t > 0 else zero
        gpl = gP[:, t, :, :H]
        gp1 = gP[:, t, :, H : 2 * H]
        gp2 = gP[:, t, :, 2 * H :]
        gh.add_(gout[:, t])
        torch.sub(p[..., H : 2 * H], c1, out=e1)
        torch.add(c1, p[..., 2 * H :], out=e2).sub_(c2)
        _tanh_(torch.addcmul(c2, r, e2, out=u).add_(b))  # recomputed: cheaper than storing it
        # dL/dm_t = gh (u - h) + gc1 d1 + gc2 d2
        torch.sub(u, h, out=tmp).mul_(gh)
        torch.mul(gc1, e1, out=gd1).addcmul_(gc2, e2)
        torch.sum(tmp.addcmul_(gd1, r), -1, keepdim=True, out=gM[:, t])
        # through h = h + m (u - h), u = tanh(s):  gs = m gh (1 - u^2)
        torch.mul(u, u, out=gs).neg_().add_(1).mul_(gh).mul_(m)
        gb.add_(gs)
        torch.mul(gc1, m, out=gd1)  # gd1 = dL/dd1
        torch.addcmul(gs, m, gc2, out=tmp)  # tmp = gd2 = dL/dd2
        torch.mul(gd1, r, out=gp1)
        torch.mul(tmp, r, out=gp2)
        # gr = gd1 e1 + gd2 e2;  r = sigmoid(-a) so da = -gr r (1 - r) = gr r (r - 1)
        e1.mul_(gd1).addcmul_(tmp, e2).mul_(r)
        torch.sub(r, 1, out=e2)
        torch.mul(e1, e2, out=gpl)
        gc1.sub_(gp1).add_(gp2)
        gc2.add_(gs).sub_(gp2)
        gh.mul_(keep[:, t]).baddbmm_(gpl, Ut_T)
    # dU = sum_t h_{t-1}^T dA_t (h_{-1} = 0), dP^l = dA
    gU = torch.bmm(out[:, :-1].reshape(D, (T - 1) * B, H).transpose(1, 2), gP[:, 1:, :, :H].reshape(D, (T - 1) * B, H))
    return gP, gM, gU, gb.sum(1)


class _RCNNScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, P: Tensor, M: Tensor, U: Tensor, b: Tensor) -> Tensor:
        P, M, U = P.contiguous(), M.contiguous(), U.contiguous()
        bb = b.unsqueeze(1)
        ctx.compiled = compiled(P, M, U, bb)
        out, c1s, c2s, rs = (compiled_forward if ctx.compiled else _rcnn_forward)(P, M, U, bb, store=True)
        ctx.save_for_backward(P, M, U, bb, out)
        ctx.steps = (c1s, c2s, rs)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, gout: Tensor):
        P, M, U, bb, out = ctx.saved_tensors
        backward = compiled_backward if ctx.compiled else _rcnn_backward
        return backward(gout.contiguous(), P, M, U, bb, out, *ctx.steps)


def rcnn_scan(P: Tensor, M: Tensor, U: Tensor, b: Tensor) -> Tensor:
    """Mask-gated bigram RCNN: ``P [D,T,B,3H]`` (λ, W1, W2 projections, b^λ
    included), ``M [D,T,B,1]``, ``U [D,H,H]``, ``b [D,H]`` -> ``h [D,T,B,H]``."""
    if torch.is_grad_enabled() and any(x.requires_grad for x in (P, M, U, b)):
        return _RCNNScan.apply(P, M, U, b)
    forward = compiled_forward if compiled(P, M, U, b) else _rcnn_forward
    return forward(P.contiguous(), M.contiguous(), U.contiguous(), b.unsqueeze(1), store=False)[0]


def rcnn_scan_autograd(P: Tensor, M: Tensor, U: Tensor, b: Tensor) -> Tensor:
    """:func:`rcnn_scan` written step by step for autograd (the reference)."""
    D, T, B, G = P.shape
    H = G // 3
    h = P.new_zeros(D, B, H)
    c1 = torch.zeros_like(h)
    c2 = torch.zeros_like(h)
    bb = b.unsqueeze(1)
    outs = []
    for p, m in zip(P.unbind(1), M.unbind(1)):  # unbind: one cheap backward node, not T slices
        lam = torch.sigmoid(p[..., :H] + torch.bmm(h, U))
        c1_new = lam * c1 + (1 - lam) * p[..., H : 2 * H]
        c2_new = lam * c2 + (1 - lam) * (c1 + p[..., 2 * H :])
        h_new = torch.tanh(c2_new + bb)
        c1 = m * c1_new + (1 - m) * c1
        c2 = m * c2_new + (1 - m) * c2
        h = m * h_new + (1 - m) * h
        outs.append(h)
    return torch.stack(outs, 1)


# ---------------------------------------------------------------------------
# LSTM (Hochreiter & Schmidhuber 1997), gates ordered [i, f, o, g]:
#   a_t = W x_t + b + U h_{t-1};  i, f, o = sigmoid(a_{i,f,o});  g = tanh(a_g)
#   c'_t = f c_{t-1} + i g;  h'_t = o tanh(c'_t)
#   c_t = c_{t-1} + m_t (c'_t - c_{t-1});  h_t = h_{t-1} + m_t (h'_t - h_{t-1})
# ---------------------------------------------------------------------------


def _lstm_forward(P: Tensor, M: Tensor, U: Tensor, store: bool):
    """The loop. Returns h of all steps and, with ``store``, the per-step c_t and
    activated gates [i, f, o, g]_t the backward needs (else empty lists)."""
    D, T, B, G = P.shape
    H = G // 4
    h = P.new_zeros(D, B, H)
    c = torch.zeros_like(h)
    cf = torch.empty_like(h)
    tc = torch.empty_like(h)
    hs, cs, acts = [], [], []
    for t in range(T):
        m = M[:, t]
        a = torch.baddbmm(P[:, t], h, U)
        a[..., : 3 * H].sigmoid_()
        g = _tanh_(a[..., 3 * H :])
        torch.mul(a[..., :H], g, out=cf).addcmul_(a[..., H : 2 * H], c)  # c' = f c + i g
        _tanh_(tc.copy_(cf))
        c = torch.addcmul(c, m, cf.sub_(c))
        h = torch.addcmul(h, m, torch.mul(a[..., 2 * H : 3 * H], tc, out=cf).sub_(h))
        hs.append(h)
        if store:
            cs.append(c)
            acts.append(a)
    return torch.stack(hs, 1), cs, acts


def _lstm_backward(gout: Tensor, P: Tensor, M: Tensor, U: Tensor, out: Tensor, cs: list, acts: list):
    D, T, B, G = P.shape
    H = G // 4
    gP = torch.empty_like(P)
    gM = torch.empty_like(M)
    Ut_T = U.transpose(1, 2)
    keep = 1 - M
    gh = P.new_zeros(D, B, H)
    gc = torch.zeros_like(gh)
    zero = torch.zeros_like(gh)
    cf = torch.empty_like(gh)
    tc = torch.empty_like(gh)
    ghf = torch.empty_like(gh)
    gcf = torch.empty_like(gh)
    tmp = torch.empty_like(gh)
    sc = P.new_empty(D, B, 3 * H)
    for t in range(T - 1, -1, -1):
        m = M[:, t]
        a = acts[t]
        i = a[..., :H]
        f = a[..., H : 2 * H]
        o = a[..., 2 * H : 3 * H]
        g = a[..., 3 * H :]
        ga = gP[:, t]
        c = cs[t - 1] if t > 0 else zero  # state before step t
        h = out[:, t - 1] if t > 0 else zero
        gh.add_(gout[:, t])
        torch.mul(i, g, out=cf).addcmul_(f, c)  # c'
        _tanh_(tc.copy_(cf))  # recomputed: cheaper than storing it
        cf.sub_(c)  # c' - c
        # dL/dm_t = gh (h' - h) + gc (c' - c)
        torch.mul(o, tc, out=tmp).sub_(h).mul_(gh).addcmul_(gc, cf)
        torch.sum(tmp, -1, keepdim=True, out=gM[:, t])
        torch.mul(gh, m, out=ghf)  # dL/dh'
        torch.mul(tc, tc, out=tmp).neg_().add_(1).mul_(o).mul_(ghf)
        torch.addcmul(tmp, gc, m, out=gcf)  # dL/dc'
        torch.mul(gcf, g, out=ga[..., :H])  # dL/di
        torch.mul(gcf, c, out=ga[..., H : 2 * H])  # dL/df
        torch.mul(ghf, tc, out=ga[..., 2 * H : 3 * H])  # dL/do
        s = a[..., : 3 * H]
        ga[..., : 3 * H].mul_(s).mul_(torch.neg(s, out=sc).add_(1))  # through the sigmoids
        torch.mul(g, g, out=tmp).neg_().add_(1).mul_(gcf).mul_(i)
        ga[..., 3 * H :].copy_(tmp)  # dL/da_g through tanh
        gc.mul_(keep[:, t]).addcmul_(gcf, f)
        gh.mul_(keep[:, t]).baddbmm_(ga, Ut_T)
    gU = torch.bmm(out[:, :-1].reshape(D, (T - 1) * B, H).transpose(1, 2), gP[:, 1:].reshape(D, (T - 1) * B, G))
    return gP, gM, gU


class _LSTMScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, P: Tensor, M: Tensor, U: Tensor) -> Tensor:
        P, M, U = P.contiguous(), M.contiguous(), U.contiguous()
        out, cs, acts = _lstm_forward(P, M, U, store=True)
        ctx.save_for_backward(P, M, U, out)
        ctx.steps = (cs, acts)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, gout: Tensor):
        P, M, U, out = ctx.saved_tensors
        return _lstm_backward(gout.contiguous(), P, M, U, out, *ctx.steps)


def lstm_scan(P: Tensor, M: Tensor, U: Tensor) -> Tensor:
    """Mask-gated LSTM: ``P [D,T,B,4H]`` (gates i, f, o, g; input bias included),
    ``M [D,T,B,1]``, ``U [D,H,4H]`` -> ``h [D,T,B,H]``."""
    if torch.is_grad_enabled() and any(x.requires_grad for x in (P, M, U)):
        return _LSTMScan.apply(P, M, U)
    return _lstm_forward(P.contiguous(), M.contiguous(), U.contiguous(), store=False)[0]


def lstm_scan_autograd(P: Tensor, M: Tensor, U: Tensor) -> Tensor:
    """:func:`lstm_scan` written step by step for autograd (the reference)."""
    D, T, B, G = P.shape
    H = G // 4
    h = P.new_zeros(D, B, H)
    c = torch.zeros_like(h)
    outs = []
    for p, m in zip(P.unbind(1), M.unbind(1)):
        a = p + torch.bmm(h, U)
        i, f, o = torch.sigmoid(a[..., : 3 * H]).chunk(3, -1)
        g = torch.tanh(a[..., 3 * H :])
        c_new = f * c + i * g
        h_new = o * torch.tanh(c_new)
        c = m * c_new + (1 - m) * c
        h = m * h_new + (1 - m) * h
        outs.append(h)
    return torch.stack(outs, 1)


# ---------------------------------------------------------------------------
# Glue shared by the recurrent encoder modules
# ---------------------------------------------------------------------------


def stack_directions(x: Tensor, mask: Tensor, weight: Tensor, bias: Tensor,
                     tokens: TokenRows | None = None) -> tuple[Tensor, Tensor]:
    """Input projections and gates in the loop layout.

    ``x [B,T,In]``, ``mask [B,T]``, ``weight [D,In,G]``, ``bias [D,G]`` ->
    ``P [D,T,B,G]`` (one batched matmul for all steps and directions, the bias a row of the
    weight against a column of ones: adding a broadcast bias to the product took a sixth of
    its time; with ``tokens``, gathered from the words' products, :func:`token_projections`)
    and ``M [D,T,B,1]``; direction 1 (if any) sees the sequence reversed in time.
    """
    D = weight.shape[0]
    mt = mask.transpose(0, 1)
    mt = torch.stack((mt, mt.flip(0))) if D == 2 else mt.unsqueeze(0)
    if tokens is not None:
        return token_projections(tokens, weight, bias), mt.unsqueeze(-1).contiguous()
    B, T, In = x.shape
    xt = x.new_empty(D, T, B, In + 1)  # the steps in order, a column of ones for the bias
    xt[0, ..., In] = 1
    xt[0, ..., :In] = x.transpose(0, 1)
    if D == 2:  # the same steps reversed (gathered in one pass where no gradient is taken through x)
        reversed_steps = torch.arange(T - 1, -1, -1, device=x.device)
        if torch.is_grad_enabled() and x.requires_grad:
            xt[1] = xt[0].index_select(0, reversed_steps)
        else:
            torch.index_select(xt[0], 0, reversed_steps, out=xt[1])
    P = torch.bmm(xt.view(D, T * B, In + 1), torch.cat((weight, bias.unsqueeze(1)), 1)).view(D, T, B, -1)
    return P, mt.unsqueeze(-1).contiguous()


def token_projections(tokens: TokenRows, weight: Tensor, bias: Tensor) -> Tensor:
    """:func:`stack_directions`' ``P [D,T,B,G]`` from the tokens' products
    (:meth:`TokenRows.products`), gathered straight into place: in one compiled pass with the
    gates and the bias (:func:`rationale_cli.models.native.token_rows.token_projections`), else with PyTorch's."""
    D, In, G = weight.shape
    B, T = tokens.ids.shape
    products, rows = tokens.products(weight, lambda: weight.permute(1, 0, 2).reshape(In, D * G))
    binary = bool(((tokens.scale == 0) | (tokens.scale == 1)).all())
    compiled = gathered_projections(products, rows, None if binary else tokens.scale, bias)
    if compiled is not None:
        return compiled
    rows = rows.t()  # [T, B]
    P = products.new_empty(D, T, B, G)
    for d in range(D):
        steps = rows if d == 0 else rows.flip(0)
        torch.index_select(products[:, d * G : (d + 1) * G], 0, steps.reshape(-1), out=P[d].view(T * B, G))
        if not binary:
            P[d].mul_((tokens.scale.t() if d == 0 else tokens.scale.t().flip(0)).unsqueeze(-1))
        P[d] += bias[d]
    return P


class _Merge(torch.autograd.Function):
    """:func:`merge_directions`, with a backward that writes the gradient of ``out`` in one
    pass per direction (autograd's, through the slices, flip and step selected, zero-filled
    and added up ``[D,T,B,H]`` four times: 13% of an encoder's step)."""

    @staticmethod
    def forward(ctx, out: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        D, T, B, H = out.shape
        read = (mask > 0).to(out.dtype)
        states = out.new_empty(B, T, D * H)
        gates = read.unsqueeze(-1)
        torch.mul(out[0].transpose(0, 1), gates, out=states[..., :H])  # each direction gated as it is placed
        if D == 2:
            torch.mul(out[1].flip(0).transpose(0, 1), gates, out=states[..., H:])
        summary = last_states(out)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(read)
        ctx.sizes = (D, T, B, H)
        return states, summary

    @staticmethod
    @once_differentiable
    def backward(ctx, gstates: Tensor | None, gsummary: Tensor | None):
        (read,) = ctx.saved_tensors
        D, T, B, H = ctx.sizes
        if gstates is None:
            gout = read.new_zeros(D, T, B, H)
        else:
            gout = read.new_empty(D, T, B, H)
            steps = gstates.view(B, T, D, H).permute(2, 1, 0, 3)  # [D, T, B, H]
            gates = read.t().unsqueeze(-1)  # [T, B, 1]
            torch.mul(steps[0], gates, out=gout[0])
            if D == 2:
                torch.mul(steps[1].flip(0), gates.flip(0), out=gout[1])
        if gsummary is not None:
            gout[:, -1] += gsummary.view(B, D, H).transpose(0, 1)
        return gout, None


def merge_directions(out: Tensor, mask: Tensor, states: bool = True) -> tuple[Tensor | None, Tensor]:
    """``out [D,T,B,H]`` -> states ``[B,T,D*H]`` (zero where mask == 0; the
    backward direction flipped back) and summary ``[B,D*H]`` = concat(forward
    h_T, backward h at position 0), i.e. each direction's final state. Without ``states``
    (no gradient through them), None and the summary: the states are not formed."""
    return _Merge.apply(out, mask) if states else (None, last_states(out))


def last_states(out: Tensor) -> Tensor:
    """Each direction's final state of ``out [D,T,B,H]``, side by side ``[B, D*H]``."""
    D, _, B, H = out.shape
    return out[:, -1].transpose(0, 1).reshape(B, D * H)
