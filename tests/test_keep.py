"""Which epoch is kept: lowest validation loss, or lowest loss at the target selection rate."""

import pytest
import torch

from rationale_cli.models.options import OptionError
from rationale_cli.runs.config import from_values
from rationale_cli.runs.keep import Keep
from rationale_cli.training import loop as fit_module
from rationale_cli.training.loop import fit
from tests.test_api import demo_parts

# (validation loss, decoded validation selection rate) per epoch: the loss alone prefers
# epoch 2, which selects half the text; epoch 3 is the best one near a 13% target
HISTORY = [(0.050, 0.30), (0.040, 0.50), (0.045, 0.14), (0.047, 0.12)]


def kept(rule: Keep, history=HISTORY) -> int:
    best = None
    for epoch, (loss, rate) in enumerate(history, 1):
        valid = {"loss": loss, "selection_rate": rate}
        if best is None or rule.key(valid) < rule.key(best[1]):
            best = (epoch, valid)
    return best[0]


def test_the_rules_disagree_on_one_history():
    assert kept(Keep()) == 2
    assert kept(Keep(0.13, 0.02)) == 3
    assert kept(Keep(0.13, 0.0)) == 1 + min(range(4), key=lambda i: abs(HISTORY[i][1] - 0.13))  # none on it: nearest
    assert kept(Keep(0.13, 0.5)) == 2  # everything within: the loss decides


def test_fit_keeps_the_weights_of_the_epoch_the_rule_picks(monkeypatch):
    scripted = iter(HISTORY)

    def validate(run, epoch, valid, batch_size):
        loss, rate = next(scripted)
        return {"loss": loss, "selection_rate": rate, "documents": len(valid)}

    monkeypatch.setattr(fit_module, "validate", validate)
    model, vocab, task, train, valid = demo_parts()
    weights = []

    class Snapshot(fit_module.Callback):
        def on_epoch_end(self, run, result):
            weights.append({k: v.clone() for k, v in run.model.state_dict().items()})

    state = fit(model, vocab, task, train[:200], valid, epochs=4, batch_size=50, lr=0.01, patience=0,
                keep=Keep(0.13, 0.02), callbacks=[Snapshot()])
    assert state.best["epoch"] == 3
    assert all(torch.equal(weights[2][k], v) for k, v in model.state_dict().items())


def fit_scripted(monkeypatch, history, **options):
    """Fit on part of the demo for as many epochs as ``history``, whose validation gives ``history``'s (loss, rate) pairs."""
    scripted = iter(history)

    def validate(run, epoch, valid, batch_size):
        loss, rate = next(scripted)
        return {"loss": loss, "selection_rate": rate, "documents": len(valid)}

    monkeypatch.setattr(fit_module, "validate", validate)
    model, vocab, task, train, valid = demo_parts()
    return fit(model, vocab, task, train[:100], valid, epochs=len(history), batch_size=50, **options)


def test_patience_waits_until_an_epoch_reaches_the_target(monkeypatch):
    # off the target (and no nearer) for three epochs, then on it, then two epochs worse
    state = fit_scripted(monkeypatch, [(0.05, 0.9), (0.04, 0.9), (0.03, 0.9), (0.05, 0.13), (0.06, 0.13),
                                       (0.07, 0.13)], patience=2, keep=Keep(0.13, 0.02))
    assert state.best["epoch"] == 4 and state.epoch == 6 and state.stop.startswith("early stop")


def test_patience_waits_until_a_held_rate_is_half_decoded(monkeypatch):
    # a slow start: the sampled rate is held, the decoded one is near 0 for three epochs, whose
    # losses wander; then 9% of a 13% target (over half) and better, then two epochs worse
    state = fit_scripted(monkeypatch, [(0.70, 0.0), (0.69, 0.01), (0.71, 0.05), (0.40, 0.09), (0.45, 0.12),
                                       (0.50, 0.13)], patience=1, keep=Keep(held=0.13))
    assert state.best["epoch"] == 4 and state.epoch == 5 and state.stop.startswith("early stop")
    assert Keep(held=0.13).key({"loss": 0.4, "selection_rate": 0.0}) == Keep().key({"loss": 0.4})  # same ranking


def test_the_default_rule_waits_for_the_rate_an_extractor_holds():
    assert from_values({"extractor": "hardkuma"}).keep_rule() == Keep(held=0.13)
    assert from_values({"extractor": "bernoulli", "lagrangian": False}).keep_rule() == Keep()
    assert from_values({"extractor": "simple"}).keep_rule() == Keep()  # an exact size decodes at it from the start


def test_best_loss_at_rate_needs_an_extractor_holding_a_rate():
    for extractor in ("hardkuma", "bernoulli"):  # bernoulli holds its rate by default (--lagrangian)
        assert from_values({"extractor": extractor, "keep": "best-loss-at-rate"}).keep_rule() == Keep(0.13, 0.02)
    rule = from_values({"extractor": "bernoulli", "lagrangian": True, "budget": "0.07",
                        "keep": "best-loss-at-rate", "rate_tolerance": 0.01}).keep_rule()
    assert rule == Keep(0.07, 0.01)
    for values in ({"extractor": "bernoulli", "lagrangian": False}, {"extractor": "simple"},
                   {"extractor": "hardkuma", "budget": "10"}):
        with pytest.raises(OptionError, match="best-loss-at-rate needs"):
            from_values({**values, "keep": "best-loss-at-rate"})
