"""The compiled loops (rationale_cli.models.native) against the PyTorch loops they stand in for: the same
values and gradients up to float32 rounding, on batches with padding, empty rows, rows
selected whole and fractional gates; and the fallback where nothing can be compiled."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
import torch

import rationale_cli.models.native as native
from rationale_cli.models.distributions.hardkuma import HardKuma
from rationale_cli.models.encoders.recurrence import _rcnn_backward, _rcnn_forward, rcnn_scan, rcnn_scan_autograd
from rationale_cli.models.native import greedy_masks, hardkuma_scan, rcnn
from rationale_cli.models.selectors.binary.hardkuma import HardKumaSelector, most_likely

pytestmark = pytest.mark.skipif(native.library("rcnn_steps") is None, reason="no C compiler here")


def gates(D: int, T: int, B: int) -> torch.Tensor:
    """Gates ``[D,T,B,1]``: row 0 empty, row 1 read whole, row 2 padded after 3 steps, the
    rest exact zeros, ones and fractions."""
    M = torch.rand(D, T, B, 1)
    M[M < 0.3] = 0.0
    M[M > 0.8] = 1.0
    M[:, :, 0] = 0.0
    M[:, :, 1] = 1.0
    M[0, 3:, 2] = 0.0
    M[1, :-3, 2] = 0.0  # the reversed direction sees the padding first
    return M


@pytest.fixture(params=["whole loop", "per step"])
def rcnn_loop(request, monkeypatch):
    """The compiled RCNN loop both ways: in C with the BLAS products on row parts, where
    PyTorch's library carries that BLAS, and one C call per step beside PyTorch's products."""
    if request.param == "per step":
        monkeypatch.setattr(rcnn, "blas", lambda: None)
    elif rcnn.blas() is None:
        pytest.skip("PyTorch's library carries no sgemm here")
    return request.param


@pytest.mark.parametrize("threads", [1, 3])
def test_compiled_rcnn_steps_match_the_plain_loop_forward_and_backward(rcnn_loop, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        check_compiled_rcnn_steps()
    finally:
        torch.set_num_threads(before)


def check_compiled_rcnn_steps():
    torch.manual_seed(0)
    D, T, B, H = 2, 29, 6, 24
    P, M = torch.randn(D, T, B, 3 * H), gates(D, T, B)
    U, b = 0.4 * torch.randn(D, H, H), torch.randn(D, 1, H)
    out, *steps = rcnn.rcnn_forward(P, M, U, b, store=True)
    ref, *ref_steps = _rcnn_forward(P, M, U, b, store=True)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
    assert torch.equal(rcnn.rcnn_forward(P, M, U, b, store=False)[0], out)
    g = torch.randn_like(out)
    for mine, theirs in zip(rcnn.rcnn_backward(g, P, M, U, b, out, *steps), _rcnn_backward(g, P, M, U, b, ref,
                                                                                            *ref_steps)):
        torch.testing.assert_close(mine, theirs.view_as(mine), atol=2e-5, rtol=1e-5)


def test_rcnn_scan_takes_the_compiled_steps_and_matches_autograd(rcnn_loop):
    torch.manual_seed(1)
    D, T, B, H = 2, 17, 5, 8
    args = [torch.randn(D, T, B, 3 * H, requires_grad=True), gates(D, T, B).requires_grad_(),
            (0.5 * torch.randn(D, H, H)).requires_grad_(), torch.randn(D, H, requires_grad=True)]
    assert rcnn.compiled(*args)
    out, ref = rcnn_scan(*args), rcnn_scan_autograd(*args)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
    w = torch.randn_like(out)
    for mine, theirs in zip(torch.autograd.grad((out * w).sum(), args), torch.autograd.grad((ref * w).sum(), args)):
        torch.testing.assert_close(mine, theirs, atol=2e-5, rtol=1e-5)


def dependent_selector(seed: int) -> HardKumaSelector:
    torch.manual_seed(seed)
    selector = HardKumaSelector(12, budget=0.2, dependent=True)
    with torch.no_grad():  # shapes far from 1, so all three regimes (0, 1, in between) occur (the head's
        selector.scan.head.bias.zero_()  # bias zeroed: its start at the budget makes 0 all but certain)
        for parameter in selector.scan.parameters():
            parameter.mul_(3)
    return selector


def sample_and_gradients(selector, sample, states, mask):
    torch.manual_seed(5)
    z, dist = sample(states, mask)
    w1, w2 = torch.randn_like(z), torch.randn_like(z)
    loss = (z * w1).sum() + (dist.log_p_nonzero() * w2 * mask).sum() + 0.1 * (dist.a * mask).sum()
    return z.detach(), torch.autograd.grad(loss, [states, *selector.parameters()])


def test_compiled_dependent_hardkuma_draws_the_same_samples_with_the_same_gradients():
    selector = dependent_selector(0)
    states = torch.randn(6, 23, 12, requires_grad=True)
    mask = torch.ones(6, 23)
    mask[0, 15:] = 0
    mask[1, 3:] = 0
    mask[2] = 0  # an empty row
    z, grads = sample_and_gradients(selector, selector.sampled, states, mask)
    ref, ref_grads = sample_and_gradients(selector, lambda s, m: selector.run(s, m, HardKuma.rsample), states, mask)
    torch.testing.assert_close(z, ref, atol=1e-5, rtol=0)
    assert 0.1 < float((z == 0).float().mean()) < 0.9 and bool((z == 1).any()) and bool(((z > 0) & (z < 1)).any())
    assert not z[2].any() and not z[0, 15:].any()
    for mine, theirs in zip(grads, ref_grads):
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("threads", [2, 3])
def test_the_dependent_loops_split_over_threads_give_what_one_thread_gives(threads):
    """Rows in parts on several threads (7 rows: parts of unequal size): the same samples,
    decodings and gradients of the states; the weights' gradients, added up over the parts,
    equal up to the order of the sum."""
    selector = dependent_selector(1)
    states = torch.randn(7, 19, 12, requires_grad=True)
    mask = torch.ones(7, 19)
    mask[3, 10:] = 0
    before = torch.get_num_threads()
    try:
        results = []
        for count in (1, threads):
            torch.set_num_threads(count)
            with torch.no_grad():
                decoded = selector.decode_with_scores(states, mask)
            results.append((*sample_and_gradients(selector, selector.sampled, states, mask), decoded))
    finally:
        torch.set_num_threads(before)
    (z1, grads1, decoded1), (z2, grads2, decoded2) = results
    assert torch.equal(z1, z2) and torch.equal(grads1[0], grads2[0])
    assert all(torch.equal(a, b) for a, b in zip(decoded1, decoded2))
    for one, split in zip(grads1[1:], grads2[1:]):
        torch.testing.assert_close(one, split, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scale", [0.3, 1.0, 3.0])
def test_compiled_dependent_hardkuma_decodes_as_the_plain_loop(scale):
    """The most likely outcome per token (0, 1 or the rectified mean), each conditioned on the
    decoded prefix, and P(z != 0); the scale moves the shapes from mostly continuous tokens to
    mostly exact 0 and 1."""
    selector = HardKumaSelector(12, budget=0.2, dependent=True)
    torch.manual_seed(3)
    states = scale * torch.randn(6, 23, 12)
    mask = torch.ones(6, 23)
    mask[0, 15:] = 0
    mask[2] = 0
    with torch.no_grad():
        for parameter in selector.scan.parameters():
            parameter.mul_(scale)
        z, scores = selector.decode_with_scores(states, mask)
        ref, dist = selector.run(states, mask, most_likely)
    continuous = (ref > 0) & (ref < 1)
    assert bool(continuous.any())
    torch.testing.assert_close(z, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(scores, dist.p_nonzero() * mask, atol=1e-5, rtol=0)


def test_without_a_compiler_or_in_float64_the_plain_loops_run(monkeypatch):
    selector = dependent_selector(2).double()
    states, mask = torch.randn(3, 9, 12, dtype=torch.float64), torch.ones(3, 9, dtype=torch.float64)
    assert not hardkuma_scan.compiled(states, mask)  # float64: the PyTorch loop
    monkeypatch.setattr(native, "library", lambda name: None)
    assert not rcnn.compiled(torch.ones(1)) and not hardkuma_scan.compiled(torch.ones(1))
    assert not greedy_masks.compiled(torch.ones(1, dtype=torch.float64))
    torch.manual_seed(3)
    a = selector.sampled(states, mask)[0]
    torch.manual_seed(3)
    assert torch.equal(a, selector.run(states, mask, HardKuma.rsample)[0])


def test_row_parts_cover_every_row_once_and_an_error_in_any_part_reaches_the_caller():
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        seen = []
        assert native.over_rows(lambda first, count: seen.append((first, count)), 8) == 3
        assert sorted(seen) == [(0, 2), (2, 3), (5, 3)]
        assert native.over_rows(lambda first, count: seen.append((first, count)), 1) == 1

        def failing(first: int, count: int) -> None:
            if first > 0:
                raise ValueError(f"part at {first}")

        with pytest.raises(ValueError, match="part at"):
            native.over_rows(failing, 8)
    finally:
        torch.set_num_threads(before)


def test_row_parts_from_several_threads_at_once_each_cover_their_rows():
    """Callers on several threads at once, with batches of every size (fewer rows than
    threads too), share the kept helper threads: each call covers its own rows once."""
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    failures = []

    def caller(seed: int) -> None:
        for rows in [1 + (seed * 7 + i) % 9 for i in range(200)]:
            seen = []
            native.over_rows(lambda first, count: seen.extend(range(first, first + count)), rows)
            if sorted(seen) != list(range(rows)):
                failures.append((seed, rows, seen))

    try:
        threads = [threading.Thread(target=caller, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        torch.set_num_threads(before)
    assert not failures


def test_a_compiler_that_fails_leaves_no_library(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_compiler_failed", False)  # restored after: the other tests build
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "_folders", lambda: [tmp_path / "cache"])
    native.library.cache_clear()
    try:
        assert native.library("rcnn_steps") is None
        assert not list((tmp_path / "cache").glob("*.so"))
    finally:
        native.library.cache_clear()
    monkeypatch.setenv("RATIONALE_NATIVE", "0")
    native.library.cache_clear()
    try:
        assert native.library("rcnn_steps") is None
    finally:
        native.library.cache_clear()


def test_a_build_says_so_removes_older_builds_and_a_failed_one_stops_the_others(monkeypatch, tmp_path, capfd):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    older, other = folder / "rcnn_steps-0123456789abcdef.so", folder / "dropout-0123456789abcdef.so"
    older.write_bytes(b"an older build")
    other.write_bytes(b"another loop's build")
    monkeypatch.setattr(native, "_folders", lambda: [folder])
    monkeypatch.setattr(native, "_compiler_failed", False)
    native.library.cache_clear()
    try:
        assert native.library("rcnn_steps") is not None
        assert "compiling rcnn_steps.c" in capfd.readouterr().err
        assert not older.exists() and other.exists() and len(list(folder.glob("rcnn_steps-*.so"))) == 1
        calls = []
        real_compile = native._compile

        def hung(command):
            calls.append(command)
            raise native.subprocess.TimeoutExpired(command, native.COMPILE_SECONDS)

        monkeypatch.setattr(native, "_compile", hung)
        native.library.cache_clear()
        assert native.library("kbest") is None and native.library("tv_prox") is None
        assert len(calls) == 1 and "did not compile" in capfd.readouterr().err
        assert not list(folder.glob(".kbest*")) and not list(folder.glob("kbest-*"))
        monkeypatch.setattr(native, "_compile", real_compile)
    finally:
        native.library.cache_clear()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_compiler_that_hangs_is_killed_with_every_process_it_started(monkeypatch, tmp_path):
    """A compiler that starts a helper (as cc starts cc1) and hangs: after COMPILE_SECONDS both
    are gone, and no library is built."""
    pids = tmp_path / "pids"
    compiler = tmp_path / "cc"
    compiler.write_text(f"#!/bin/sh\nsleep 60 &\necho $$ $! > {pids}\nsleep 60\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CC", str(compiler))
    monkeypatch.setattr(native, "_folders", lambda: [tmp_path / "cache"])
    monkeypatch.setattr(native, "_compiler_failed", False)
    monkeypatch.setattr(native, "COMPILE_SECONDS", 3)  # time for the script to start its helper, loaded or not
    native.library.cache_clear()
    try:
        assert native.library("kbest") is None
    finally:
        native.library.cache_clear()
    started = [int(pid) for pid in pids.read_text().split()]
    deadline = time.monotonic() + 5  # a killed process takes a moment to be gone
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(started) == 2 and not any(alive(pid) for pid in started)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def test_a_library_is_built_and_loaded_only_in_a_folder_no_one_else_can_write(monkeypatch, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(native, "_folders", lambda: [shared])
    native.library.cache_clear()
    try:
        assert native.library("rcnn_steps") is None and not list(shared.iterdir())
        shared.chmod(0o700)
        native.library.cache_clear()
        assert native.library("rcnn_steps") is not None and len(list(shared.glob("rcnn_steps-*.so"))) == 1
    finally:
        native.library.cache_clear()


def test_denormal_floats_are_flushed_where_training_and_predict_ask_for_it():
    from rationale_cli.runtime.devices import flush_denormals

    torch.set_flush_denormal(False)
    tiny = torch.tensor([1e-39])  # a denormal float32
    assert float(tiny * 1.0) > 0.0
    try:
        if not flush_denormals():
            pytest.skip("this CPU keeps denormal floats")
        assert float(tiny * 1.0) == 0.0
    finally:
        torch.set_flush_denormal(False)


@pytest.mark.parametrize("pairwise", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
def test_compiled_chain_tables_match_the_plain_loops(monkeypatch, pairwise, threads):
    """The k-subset chain program's four log-semiring loops (rationale_cli.models.native.chain_tables) against
    chain_dp's PyTorch loops: tables, marginals and exact gradients, on rows with padding
    (u = NEG), an empty row, budgets from 0 to past the length, exactly k and at most k."""
    from rationale_cli.models.distributions import chain_dp
    from rationale_cli.models.native import chain_tables

    torch.manual_seed(5 + pairwise)
    T, B, K = 23, 7, 6
    u = 3 * torch.randn(B, T)
    u[2, 15:] = chain_dp.NEG
    u[3] = chain_dp.NEG
    w = torch.randn(B, T) if pairwise else None
    if w is not None:
        w[2, 15:] = 0.0
        w[:, 0] = 0.0
    g = torch.randn(B, T)

    def run():
        x = u.clone().requires_grad_(True)
        y = None if w is None else w.clone().requires_grad_(True)
        found = {}
        for at_most in (False, True):
            ends = chain_dp.accepted_counts(torch.tensor([0, 1, 3, 6, 6, 2, 4]), K, at_most)
            log_z, mu, _ = chain_dp.chain_marginals(x, y, ends, K)
            grads = torch.autograd.grad((mu * g).sum() + log_z.sum(), [x] + ([] if y is None else [y]))
            ut, wt = x.detach().t().contiguous(), None if y is None else y.detach().t().contiguous()
            found[at_most] = (chain_dp.forward_table(ut, wt, K)[0], chain_dp.backward_table(ut, wt, ends, K),
                              log_z, mu, *grads)
        return found

    assert chain_tables.forward_log(torch.zeros(2, 3), None, torch.full((3, 4, 1, 3), chain_dp.NEG))  # it runs here
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        compiled = run()
        monkeypatch.setattr(chain_tables, "_run", lambda *args: False)
        plain = run()
    finally:
        torch.set_num_threads(before)
    for at_most in (False, True):
        for got, expected in zip(compiled[at_most], plain[at_most]):
            torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-5)
