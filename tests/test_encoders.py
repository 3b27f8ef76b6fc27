"""Encoders: padding and skipped tokens never change a result, the RCNN and LSTM
equations against literal references, hand-written backward passes against
autograd and finite differences."""

from __future__ import annotations

import pytest
import torch

from rationale_cli.models import native
from rationale_cli.models.encoders import (
    ENCODERS,
    CNNEncoder,
    Encoder,
    LSTMEncoder,
    RCNNEncoder,
    build_encoder,
)
from rationale_cli.models.encoders.base import TokenRows
from rationale_cli.models.encoders.cnn import kernel_taps, scattered_sum, shifted_sum
from rationale_cli.models.encoders.recurrence import (
    lstm_scan,
    lstm_scan_autograd,
    merge_directions,
    rcnn_scan,
    rcnn_scan_autograd,
)

IN, HID = 6, 5
CONFIGS = [("rcnn", True), ("rcnn", False), ("lstm", True), ("lstm", False), ("cnn", True)]
RECURRENT = [c for c in CONFIGS if c[0] != "cnn"]


def make(kind: str, bidirectional: bool, dtype=torch.float32, seed: int = 0) -> Encoder:
    torch.manual_seed(seed)
    enc = build_encoder(kind, IN, HID, bidirectional=bidirectional).to(dtype)
    with torch.no_grad():  # non-zero biases so that "state untouched" is a real check
        for p in enc.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return enc.eval()


def ids(config):
    kind, bi = config
    return f"{kind}-{'bi' if bi else 'uni'}"


@pytest.mark.parametrize("config", CONFIGS, ids=ids)
def test_shapes_and_output_size(config):
    enc = make(*config)
    states, summary = enc(torch.randn(3, 7, IN), torch.ones(3, 7))
    assert isinstance(enc, Encoder)
    assert states.shape == (3, 7, enc.output_size) and summary.shape == (3, enc.output_size)
    assert enc.output_size == (2 * HID if config == ("rcnn", True) or config == ("lstm", True) else HID)


@pytest.mark.parametrize("config", CONFIGS, ids=ids)
def test_padding_never_changes_a_result(config):
    enc = make(*config)
    torch.manual_seed(1)
    lengths = [4, 9, 1, 6]
    T = max(lengths)
    x = torch.randn(len(lengths), T, IN)
    mask = torch.zeros(len(lengths), T)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    x_batch = x * mask.unsqueeze(-1) + 5.0 * (1 - mask).unsqueeze(-1)  # garbage in the padding
    states, summary = enc(x_batch, mask)
    for i, n in enumerate(lengths):
        s1, h1 = enc(x[i : i + 1, :n], torch.ones(1, n))
        torch.testing.assert_close(states[i, :n], s1[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(summary[i], h1[0], atol=1e-5, rtol=0)
        assert torch.all(states[i, n:] == 0)


@pytest.mark.parametrize("config", RECURRENT, ids=ids)
def test_masked_step_equals_deleting_the_token(config):
    enc = make(*config)
    torch.manual_seed(2)
    x = torch.randn(2, 8, IN)
    mask = torch.ones(2, 8)
    mask[:, 3] = 0
    mask[1, 6] = 0
    states, summary = enc(x, mask)
    for i in range(2):
        keep = mask[i].bool()
        s1, h1 = enc(x[i : i + 1, keep], torch.ones(1, int(keep.sum())))
        torch.testing.assert_close(states[i, keep], s1[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(summary[i], h1[0], atol=1e-5, rtol=0)
        assert torch.all(states[i, ~keep] == 0)


@pytest.mark.parametrize("config", CONFIGS, ids=ids)
def test_all_masked_row_gives_zeros(config):
    enc = make(*config)
    mask = torch.ones(2, 5)
    mask[1] = 0
    states, summary = enc(torch.randn(2, 5, IN), mask)
    assert torch.all(states[1] == 0) and torch.all(summary[1] == 0)


@pytest.mark.parametrize("config", CONFIGS, ids=ids)
def test_fractional_masks_give_finite_gradients(config):
    enc = make(*config)
    torch.manual_seed(3)
    x = torch.randn(3, 7, IN, requires_grad=True)
    z = torch.rand(3, 7)
    z[0, 2] = 0.0
    z[1, :3] = 1.0
    z[2, 5:] = 0.0  # padding
    z.requires_grad_(True)
    states, summary = enc(x * z.detach().unsqueeze(-1), z)
    (states.square().sum() + summary.sin().sum()).backward()
    for g in (x.grad, z.grad):
        assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0
    for p in enc.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()


@pytest.mark.parametrize("config", CONFIGS, ids=ids)
def test_no_grad_path_matches_training_path(config):
    """Under no_grad the recurrences keep no per-step buffers (another code path)."""
    enc = make(*config)
    x = torch.randn(3, 6, IN, requires_grad=True)
    mask = torch.rand(3, 6)
    mask[0, 4:] = 0
    s1, h1 = enc(x, mask)
    with torch.no_grad():
        s2, h2 = enc(x, mask)
    torch.testing.assert_close(s1.detach(), s2, atol=1e-6, rtol=0)
    torch.testing.assert_close(h1.detach(), h2, atol=1e-6, rtol=0)


@pytest.mark.parametrize("config", RECURRENT, ids=ids)
def test_inference_runs_only_the_read_steps_with_the_same_result(config, monkeypatch):
    """A step with mask 0 carries the state over, so without gradients the scan runs each
    row's read steps only, moved to the front: the states and summaries of the full scan."""
    enc = make(*config)
    x = torch.randn(4, 12, IN)
    mask = torch.zeros(4, 12)
    mask[0, [1, 5, 6]] = 1.0
    mask[1, [0, 11]] = torch.tensor([0.5, 1.0])
    mask[3, 3] = 0.25  # row 2 reads nothing
    steps = []
    scan = enc.scan
    monkeypatch.setattr(enc, "scan", lambda x, m, *rest: (steps.append(x.shape[1]), scan(x, m, *rest))[1])
    full = enc(x.clone().requires_grad_(), mask)
    with torch.no_grad():
        short = enc(x, mask)
        none = enc(x, torch.zeros_like(mask))
    assert steps == [12, 3]  # the full scan, then the three steps of row 0
    torch.testing.assert_close(short[0], full[0].detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(short[1], full[1].detach(), atol=1e-6, rtol=0)
    assert (short[0][mask == 0] == 0).all()
    assert not none[0].any() and not none[1].any()


@pytest.mark.parametrize("kernel_size", [1, 3, 5])
@pytest.mark.parametrize("length", [1, 2, 9])
def test_inference_convolutions_equal_conv1d(kernel_size, length):
    """The CNN's inference convolutions (one matrix product and shifted sums; from the
    nonzero rows only) against Conv1d, short sequences included."""
    torch.manual_seed(kernel_size + length)
    conv = torch.nn.Conv1d(IN, HID, kernel_size, padding=kernel_size // 2)
    x = torch.randn(4, length, IN) * (torch.rand(4, length, 1) < 0.4)
    with torch.no_grad():
        expected = conv(x.transpose(1, 2)).transpose(1, 2)
        taps = kernel_taps(conv)
        torch.testing.assert_close(shifted_sum(conv, x @ taps), expected, atol=1e-6, rtol=0)
        batch, position = (x != 0).any(-1).nonzero(as_tuple=True)
        sparse = scattered_sum(conv, x[batch, position] @ taps, batch, position, (4, length))
        torch.testing.assert_close(sparse, expected, atol=1e-6, rtol=0)


def test_cnn_inference_on_a_short_rationale_matches_training(monkeypatch):
    """A predictor's input is zero outside the rationale: without gradients the CNN takes
    the sparse path, and gives what the training path gives."""
    import rationale_cli.models.encoders.cnn as cnn

    torch.manual_seed(0)
    enc = CNNEncoder(IN, HID, layers=2).eval()
    x = torch.randn(5, 20, IN) * (torch.rand(5, 20, 1) < 0.15)
    mask = torch.ones(5, 20)
    mask[1, 14:] = 0
    calls = []
    monkeypatch.setattr(cnn, "scattered_sum", lambda *a: (calls.append(1), scattered_sum(*a))[1])
    states, summary = enc(x.clone().requires_grad_(), mask)
    with torch.no_grad():
        fast_states, fast_summary = enc(x, mask)
    assert calls  # the first layer's input is mostly zero rows
    torch.testing.assert_close(fast_states, states.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(fast_summary, summary.detach(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("config", [*CONFIGS, ("cnn", 2)], ids=ids)
def test_inference_per_distinct_token_matches_training(config):
    """Given what the input is made of (embedding rows times a gate), encoders compute their
    first layer from each word's products at inference: the training path's result (a
    second convolution included)."""
    enc = make(*config) if config != ("cnn", 2) else CNNEncoder(IN, HID, layers=2).eval()
    table = torch.randn(9, IN)
    ids_ = torch.randint(0, 9, (4, 11))
    for scale in (torch.ones(4, 11), (torch.rand(4, 11) < 0.3).float() * torch.rand(4, 11).round().add(0.5).clamp(max=1)):
        mask = torch.ones(4, 11)
        mask[2, 7:] = 0
        x = table[ids_] * scale.unsqueeze(-1)
        gate = mask if config[0] == "cnn" else mask * scale
        states, summary = enc(x.clone().requires_grad_(), gate)
        with torch.no_grad():
            fast_states, fast_summary = enc(x, gate, TokenRows(ids_, table, scale))
        torch.testing.assert_close(fast_states, states.detach(), atol=1e-5, rtol=0)
        torch.testing.assert_close(fast_summary, summary.detach(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "plain"])
@pytest.mark.parametrize("config", [*CONFIGS, ("cnn", 2)], ids=ids)
def test_gated_summary_from_the_tokens_matches_training(config, compiled, monkeypatch):
    """A predictor at inference: ``gated`` given what its input is made of computes from the
    tokens (the gated input not formed, nor a recurrent encoder's states) and returns the
    summary that the gated input gives with gradients; with short and empty gates (a
    recurrent encoder then scans only the read steps) and with a full one (every step), with
    the compiled first layers and with PyTorch's."""
    if compiled and native.library("token_rows") is None:
        pytest.skip("no C compiler")
    if not compiled:
        monkeypatch.setattr(native, "library", lambda name: None)
    enc = make(*config) if config != ("cnn", 2) else CNNEncoder(IN, HID, layers=2).eval()
    table = torch.randn(9, IN)
    ids_ = torch.randint(0, 9, (5, 11))
    padding = torch.ones(5, 11)
    padding[2, 7:] = 0
    short = (torch.rand(5, 11) < 0.2).float() * torch.rand(5, 11).add(0.5).clamp(max=1)
    short[1] = 0
    full = short.clone()
    full[3] = 1
    for gate in (short * padding, full * padding):
        read = gate if enc.skips_unselected else padding
        x = table[ids_]
        expected = enc.gated(x.clone().requires_grad_(), gate, read).detach()
        with torch.no_grad():
            fast = enc.gated(x, gate, read, tokens=TokenRows(ids_, table, gate))
        torch.testing.assert_close(fast, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["cnn", "rcnn"])
def test_kept_vocabulary_products_follow_changes_of_the_weights(kind):
    """The products of the whole vocabulary are kept between batches, and made again after an
    in-place change of the layer's weight (an optimizer step) or of the embeddings."""
    enc = make(kind, True)
    table = torch.randn(9, IN)
    ids_ = torch.randint(0, 9, (3, 7))
    mask = torch.ones(3, 7)
    first_weight = next(p for name, p in enc.named_parameters() if "weight" in name)
    for change in (None, lambda: first_weight.add_(0.3), lambda: table.mul_(-2.0)):
        with torch.no_grad():
            if change is not None:
                change()
            fast = enc(table[ids_], mask, TokenRows(ids_, table, torch.ones(3, 7)))[1]
        expected = enc(table[ids_].requires_grad_(), mask)[1].detach()
        torch.testing.assert_close(fast, expected, atol=1e-5, rtol=0)


def test_kept_products_follow_a_change_of_dtype_and_skip_inference_tensors():
    enc = make("cnn", True)
    table = torch.randn(9, IN)
    ids_ = torch.randint(0, 9, (3, 7))
    mask = torch.ones(3, 7)
    with torch.no_grad():
        enc(table[ids_], mask, TokenRows(ids_, table, mask))
    enc.double()  # new storage for the same parameter objects, versions unchanged
    table, mask = table.double(), mask.double()
    with torch.no_grad():
        fast = enc(table[ids_], mask, TokenRows(ids_, table, mask))[1]
    expected = enc(table[ids_].requires_grad_(), mask)[1].detach()
    assert fast.dtype == torch.float64
    torch.testing.assert_close(fast, expected, atol=1e-9, rtol=0)
    with torch.inference_mode():  # tensors without a version counter: nothing kept, same result
        built = make("rcnn", True)
        rows = torch.randn(9, IN)
        states = built(rows[ids_], mask.float(), TokenRows(ids_, rows, torch.ones(3, 7)))[0]
        plain = built(rows[ids_], mask.float())[0]  # input projections of every position
    torch.testing.assert_close(states, plain, atol=1e-5, rtol=0)


def test_training_gradient_of_the_cnn_summary_goes_to_the_first_of_tied_maxima():
    """Inference takes the max without indices; training keeps max's gradient rule."""
    enc = CNNEncoder(IN, HID, kernel_size=1)
    x = torch.randn(1, 1, IN).repeat(1, 3, 1).requires_grad_()  # three identical positions
    enc(x, torch.ones(1, 3))[1].sum().backward()
    assert x.grad[0, 0].abs().sum() > 0 and not x.grad[0, 1:].any()


def test_empty_sequences():
    for kind in ENCODERS:
        enc = build_encoder(kind, IN, HID, vocab_size=10)
        x = torch.zeros(2, 0, dtype=torch.long) if enc.reads_ids else torch.randn(2, 0, IN)
        states, summary = enc(x, torch.ones(2, 0))
        assert states.shape == (2, 0, enc.output_size) and torch.all(summary == 0)


# --- references ------------------------------------------------------------


def rcnn_reference(enc: RCNNEncoder, x: torch.Tensor, mask: torch.Tensor):
    """Lei et al. (2016) / Bastings et al. (2019) App. B.1.1, one sequence and one step at a time."""
    H = enc.hidden_size
    directions = []
    for d in range(2 if enc.bidirectional else 1):
        W = enc.weight_ih[d]
        Wl, W1, W2 = W[:, :H], W[:, H : 2 * H], W[:, 2 * H :]
        Ul, bl, b = enc.weight_hh[d], enc.bias_lambda[d], enc.bias[d]
        order = list(range(x.shape[1]))[:: 1 if d == 0 else -1]
        rows, finals = [], []
        for i in range(x.shape[0]):
            h = c1 = c2 = torch.zeros(H, dtype=x.dtype)
            hs = {}
            for t in order:
                xt, m = x[i, t], mask[i, t]
                lam = torch.sigmoid(xt @ Wl + h @ Ul + bl)
                c1_new = lam * c1 + (1 - lam) * (xt @ W1)
                c2_new = lam * c2 + (1 - lam) * (c1 + xt @ W2)
                h_new = torch.tanh(c2_new + b)
                c1 = m * c1_new + (1 - m) * c1
                c2 = m * c2_new + (1 - m) * c2
                h = m * h_new + (1 - m) * h
                hs[t] = h
            rows.append(torch.stack([hs[t] for t in range(x.shape[1])]))
            finals.append(h)
        directions.append((torch.stack(rows), torch.stack(finals)))
    states = torch.cat([s for s, _ in directions], -1) * (mask > 0).unsqueeze(-1)
    return states, torch.cat([f for _, f in directions], -1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_rcnn_matches_the_paper_equations(bidirectional):
    enc = make("rcnn", bidirectional, dtype=torch.float64)
    torch.manual_seed(4)
    x = torch.randn(3, 5, IN, dtype=torch.float64)
    mask = torch.rand(3, 5, dtype=torch.float64)
    mask[0, 1] = 0
    mask[2, 3:] = 0
    mask[1, 2] = 1
    states, summary = enc(x, mask)
    ref_states, ref_summary = rcnn_reference(enc, x, mask)
    torch.testing.assert_close(states, ref_states, atol=1e-6, rtol=0)
    torch.testing.assert_close(summary, ref_summary, atol=1e-6, rtol=0)


def test_lstm_matches_torch_lstm():
    """With an all-ones mask the masked LSTM is torch.nn.LSTM (gate order i, f, g, o there)."""
    enc = make("lstm", True, dtype=torch.float64)
    ref = torch.nn.LSTM(IN, HID, bidirectional=True, batch_first=True).double()
    H = HID
    perm = torch.cat([torch.arange(0, 2 * H), torch.arange(3 * H, 4 * H), torch.arange(2 * H, 3 * H)])  # ifgo <- ifog
    with torch.no_grad():
        for d, suffix in enumerate(["", "_reverse"]):
            getattr(ref, f"weight_ih_l0{suffix}").copy_(enc.weight_ih[d].T[perm])
            getattr(ref, f"weight_hh_l0{suffix}").copy_(enc.weight_hh[d].T[perm])
            getattr(ref, f"bias_ih_l0{suffix}").copy_(enc.bias[d][perm])
            getattr(ref, f"bias_hh_l0{suffix}").zero_()
    x = torch.randn(2, 6, IN, dtype=torch.float64)
    states, summary = enc(x, torch.ones(2, 6, dtype=torch.float64))
    ref_states, (h_n, _) = ref(x)
    torch.testing.assert_close(states, ref_states, atol=1e-7, rtol=0)
    torch.testing.assert_close(summary, torch.cat([h_n[0], h_n[1]], -1), atol=1e-7, rtol=0)


def test_cnn_summary_is_masked_max():
    enc = make("cnn", True)
    x = torch.randn(2, 6, IN)
    mask = torch.tensor([[1, 1, 0, 1, 1, 0], [0, 1, 1, 1, 0, 0]], dtype=torch.float32)
    states, summary = enc(x, mask)
    conv = torch.relu(enc.convs[0]((x * mask.unsqueeze(-1)).transpose(1, 2))).transpose(1, 2)
    expected = conv.masked_fill(mask.unsqueeze(-1) == 0, float("-inf")).max(1).values
    torch.testing.assert_close(summary, expected)
    torch.testing.assert_close(states, conv * mask.unsqueeze(-1))


# --- gradients -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["rcnn", "lstm"])
def test_gradcheck_encoder_wrt_input_and_mask(kind):
    enc = make(kind, True, dtype=torch.float64)
    torch.manual_seed(5)
    x = torch.randn(2, 4, IN, dtype=torch.float64, requires_grad=True)
    mask = (0.1 + 0.8 * torch.rand(2, 4, dtype=torch.float64)).requires_grad_()

    def f(x, mask):
        states, summary = enc(x, mask)
        return states, summary

    assert torch.autograd.gradcheck(f, (x, mask))


@pytest.mark.parametrize("kind", ["rcnn", "lstm"])
def test_hand_written_backward_matches_autograd(kind):
    """The scans' backward against their step-by-step autograd twins, and gradcheck,
    with exact zeros, ones and fractions in the gate."""
    torch.manual_seed(6)
    D, T, B, H = 2, 6, 3, 4
    G = 3 if kind == "rcnn" else 4
    P = torch.randn(D, T, B, G * H, dtype=torch.float64, requires_grad=True)
    M = torch.rand(D, T, B, 1, dtype=torch.float64)
    M[0, 1, 0] = 0
    M[1, 2, 1] = 1
    M[:, -1, 2] = 0
    M.requires_grad_(True)
    U = (0.5 * torch.randn(D, H, (1 if kind == "rcnn" else 4) * H, dtype=torch.float64)).requires_grad_()
    args = [P, M, U]
    if kind == "rcnn":
        args.append(torch.randn(D, H, dtype=torch.float64, requires_grad=True))
        fast, slow = rcnn_scan, rcnn_scan_autograd
    else:
        fast, slow = lstm_scan, lstm_scan_autograd
    out, ref = fast(*args), slow(*args)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    w = torch.randn_like(out)
    g_fast = torch.autograd.grad((out * w).sum(), args)
    g_slow = torch.autograd.grad((ref * w).sum(), args)
    for a, b in zip(g_fast, g_slow):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)
    assert torch.autograd.gradcheck(fast, tuple(args))


@pytest.mark.parametrize("directions", [1, 2])
def test_merged_directions_have_the_gradient_of_their_plain_slices(directions):
    """merge_directions' one-pass backward against autograd through the slices it stands for,
    with the states, the summary or both read (a predictor reads the summary alone)."""
    torch.manual_seed(7)
    D, T, B, H = directions, 6, 4, 3
    out = torch.randn(D, T, B, H, dtype=torch.float64, requires_grad=True)
    mask = (torch.rand(B, T, dtype=torch.float64) > 0.3).to(torch.float64)
    states, summary = merge_directions(out, mask)
    plain = [out[0].transpose(0, 1)] + ([out[1].flip(0).transpose(0, 1)] if D == 2 else [])
    plain_states = torch.cat(plain, -1) * mask.unsqueeze(-1)
    plain_summary = out[:, -1].transpose(0, 1).reshape(B, D * H)
    assert torch.equal(states, plain_states) and torch.equal(summary, plain_summary)
    weights = torch.randn_like(states), torch.randn_like(summary)
    for read in ([0], [1], [0, 1]):
        ours = torch.autograd.grad(sum(((states, summary)[i] * weights[i]).sum() for i in read), out,
                                   retain_graph=True)[0]
        theirs = torch.autograd.grad(sum(((plain_states, plain_summary)[i] * weights[i]).sum() for i in read), out,
                                     retain_graph=True)[0]
        assert torch.equal(ours, theirs)
    assert torch.autograd.gradcheck(lambda o: merge_directions(o, mask), (out,))


# --- construction ----------------------------------------------------------


def test_build_encoder_kinds_and_errors():
    assert tuple(ENCODERS) == ("rcnn", "lstm", "cnn", "bow")
    assert isinstance(build_encoder("rcnn", 4, 3), RCNNEncoder)
    assert isinstance(build_encoder("lstm", 4, 3, bidirectional=False), LSTMEncoder)
    cnn = build_encoder("cnn", 4, 3, kernel_size=5, dropout=0.1)
    assert isinstance(cnn, CNNEncoder) and cnn.output_size == 3 and cnn.convs[0].kernel_size == (5,)
    with pytest.raises(ValueError, match="unknown encoder"):
        build_encoder("gru", 4, 3)
    with pytest.raises(ValueError, match="odd"):
        build_encoder("cnn", 4, 3, kernel_size=4)


def test_dropout_only_in_training():
    enc = build_encoder("rcnn", IN, HID, dropout=0.5)
    x, mask = torch.randn(2, 5, IN), torch.ones(2, 5)
    enc.eval()
    a, b = enc(x, mask)[1], enc(x, mask)[1]
    assert torch.equal(a, b)
    enc.train()
    torch.manual_seed(0)
    c = enc(x, mask)[1]
    assert not torch.allclose(a, c)


def test_rcnn_cell_steps_match_the_encoder():
    """RCNNCell (one step at a time, for the dependent selector) = unidirectional RCNNEncoder."""
    from rationale_cli.models.encoders.rcnn import RCNNCell

    enc = make("rcnn", False, dtype=torch.float64)
    cell = RCNNCell(IN, HID).double()
    with torch.no_grad():
        cell.weight_ih.copy_(enc.weight_ih[0])
        cell.bias_lambda.copy_(enc.bias_lambda[0])
        cell.weight_hh.copy_(enc.weight_hh[0])
        cell.bias.copy_(enc.bias[0])
    x = torch.randn(3, 5, IN, dtype=torch.float64)
    mask = torch.rand(3, 5, dtype=torch.float64)
    mask[0, 2] = 0
    mask[1, 3:] = 0
    states, summary = enc(x, mask)
    state = cell.initial(3, x)
    hs = []
    for t in range(5):
        state = cell(x[:, t], state, mask[:, t])
        hs.append(state[-1])
    torch.testing.assert_close(torch.stack(hs, 1) * (mask > 0).unsqueeze(-1), states)
    torch.testing.assert_close(state[-1], summary)
    assert len(cell(x[:, 0], cell.initial(3, x))) == 3  # no mask: a plain step


@pytest.mark.parametrize("kind", ["rcnn", "lstm"])
def test_training_scan_over_the_read_steps_only_gives_the_same_values_and_gradients(kind):
    """With ``skip`` a recurrent predictor runs only the steps its gate reads, with gradients:
    for a gate whose zeros carry no gradient (here a clamp, as HardKuma's samples), the
    states, the summary and every gradient equal the full scan's."""
    torch.manual_seed(0)
    encoder = (RCNNEncoder if kind == "rcnn" else LSTMEncoder)(5, 4).double()
    x = torch.randn(3, 12, 5, dtype=torch.float64, requires_grad=True)
    logits = torch.randn(3, 12, dtype=torch.float64).mul(2).sub(1.5).requires_grad_(True)
    mask = torch.ones(3, 12, dtype=torch.float64)
    mask[2, 7:] = 0
    results = []
    for skip in (False, True):
        gate = logits.clamp(0, 1) * mask
        states, summary = encoder(x * gate.unsqueeze(-1), gate, skip=skip)
        loss = (summary * torch.arange(1.0, 1 + summary.shape[1])).sum() + states.square().sum()
        results.append((states, summary, torch.autograd.grad(loss, [x, logits, *encoder.parameters()])))
    assert int((logits.clamp(0, 1) * mask > 0).sum(1).max()) < 0.75 * 12  # the skipping scan ran
    (states, summary, grads), (skipped_states, skipped_summary, skipped_grads) = results
    assert torch.allclose(states, skipped_states, atol=1e-12) and torch.allclose(summary, skipped_summary, atol=1e-12)
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(grads, skipped_grads))


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("kind", ["rcnn", "lstm"])
def test_a_recurrent_summary_in_training_forms_no_states_and_equals_the_forward_pass(kind, skip):
    """``summary`` (a predictor's read) in training leaves the states unformed and gives
    ``forward(...)[1]``: the same values and gradients of the input, the gate and every weight,
    with rows that are empty, padded or wholly read."""
    torch.manual_seed(3)
    encoder = (RCNNEncoder if kind == "rcnn" else LSTMEncoder)(5, 4, dropout=0.3).double().train()
    x = torch.randn(4, 10, 5, dtype=torch.float64, requires_grad=True)
    logits = torch.randn(4, 10, dtype=torch.float64).mul(2).sub(1.5).requires_grad_(True)
    mask = torch.ones(4, 10, dtype=torch.float64)
    mask[1, 6:] = 0
    results = []
    for read in (lambda g: encoder.summary(x * g.unsqueeze(-1), g, skip=skip),
                 lambda g: encoder(x * g.unsqueeze(-1), g, skip=skip)[1]):
        torch.manual_seed(5)  # the same dropout draw
        gate = logits.clamp(0, 1) * mask
        gate = torch.cat((gate[:2], torch.zeros_like(gate[2:3]), mask[3:]))  # an empty row, a wholly read one
        summary = read(gate)
        loss = (summary * torch.linspace(-1, 2, summary.shape[1], dtype=torch.float64)).sum()
        results.append((summary, torch.autograd.grad(loss, [x, logits, *encoder.parameters()])))
    (summary, grads), (plain, plain_grads) = results
    assert torch.allclose(summary, plain, atol=1e-12)
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(grads, plain_grads))
    assert encoder.encoded(x, mask, None, skip, False, states=False)[0] is None  # none formed, with gradients


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("kind,layers", [("cnn", 1), ("cnn", 2), ("rcnn", 1), ("lstm", 1)])
def test_gated_documents_share_one_dropout_draw_and_the_cnn_reads_them_from_tap_products(kind, layers, skip):
    """``gated(x, gates, mask, rows)`` in training is ``forward(dropout(x)[rows] * gate)[1]`` with
    one dropout draw per document (the same seed gives the same draw), in values and in
    every gradient (the gates' too, unless ``skip`` says they need none); with ``skip`` the
    CNN computes it from each document's tap products at the positions the gates reach, not
    by convolving each gated copy."""
    torch.manual_seed(0)
    enc = build_encoder(kind, IN, HID, bidirectional=True, dropout=0.5, layers=layers).double().train()
    x = torch.randn(4, 7, IN, dtype=torch.float64, requires_grad=True)
    rows = torch.tensor([3, 0, 1, 0, 3, 3])  # in any order; document 2 has no gate
    gate = (torch.rand(6, 7) < 0.5).double() * torch.rand(6, 7, dtype=torch.float64)
    gate[2, 5:] = 0  # document 1 is shorter
    gate[4] = 0  # a gate that reaches no position: its summary comes from the bias alone
    gate[5, 2:] = 1  # one whose every position is reached
    gate.requires_grad_(not skip)
    mask = torch.ones(6, 7, dtype=torch.float64)
    mask[2, 5:] = 0
    read = gate if enc.skips_unselected else mask

    def run(encode):
        torch.manual_seed(11)
        summary = encode()
        loss = (summary * torch.linspace(-1, 1, summary.shape[-1], dtype=torch.float64)).sum() + summary.square().sum()
        grads = torch.autograd.grad(loss, [x, *([] if skip else [gate]), *enc.parameters()])
        return summary.detach(), grads

    fast = run(lambda: enc.gated(x, gate, read, rows, skip=skip))
    plain = run(lambda: enc(enc.dropout(x)[rows] * gate.unsqueeze(-1), read, skip=skip, dropped=True)[1])
    assert torch.allclose(fast[0], plain[0])
    for a, b in zip(fast[1], plain[1]):
        assert torch.allclose(a, b)
