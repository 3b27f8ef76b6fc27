"""Two-stage training (``train --support RUN``): the support's selector, copied and fixed,
decodes the rationales a new predictor learns from; the result is a run like any other."""

import json
import math
from collections import Counter

import pytest
import torch
from helpers import trained_on_part_of_demo
from typer.testing import CliRunner

import rationale_cli as rationale
from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.models.decoding import Decoding
from rationale_cli.output.run_report import training_panels
from rationale_cli.training.support import SELECTOR_SIDE


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("support")
    trained_on_part_of_demo(root / "support", extractor="hardkuma", budget=0.2, reference=False)
    trained_on_part_of_demo(root / "second", support=str(root / "support"), predictor_encoder="bow", lr=0.01)
    return root / "support", root / "second"


def selector_side(model) -> dict:
    return {k: v for k, v in model.state_dict().items() if k.startswith(SELECTOR_SIDE)}


def test_the_selector_is_the_support_s_and_stays_fixed_in_training(runs):
    support, second = (rationale.load(run) for run in runs)
    theirs, mine = selector_side(support.model), selector_side(second.model)
    assert set(theirs) == set(mine) and any(k.startswith("selector.") for k in mine)
    assert all(torch.equal(theirs[k], mine[k]) for k in theirs)
    assert not any(p.requires_grad for part in second.model.selector_side() for p in part.parameters())
    trained = [k for k in second.model.state_dict() if k.startswith(("predictor_encoder.", "output."))]
    assert trained, "the predictor is the new run's own"


def test_the_run_decodes_as_the_support_at_its_budget_in_sentences(runs):
    support, second = (rationale.load(run) for run in runs)
    records = sources.load("demo", "test")[:40]
    asked = support.predict(records, decoding=Decoding(rate=0.2, sentences=True))
    own = second.predict(records)
    assert [r.selected for r in own] == [r.selected for r in asked]
    assert any(sum(r.selected) for r in own)


def test_the_config_records_the_support_and_the_run_works_with_every_command(runs, tmp_path):
    support, second = runs
    config = json.loads((second / "config.json").read_text())
    assert config["support"] == str(support) and config["support_sentences"] is True
    assert config["extractor"] == "hardkuma" and config["predictor_encoder"] == "bow"
    out = tmp_path / "m.json"
    result = invoke("evaluate", second, "demo", "--no-faithfulness", "--json", out)
    assert result.exit_code == 0, result.output
    metrics = json.loads(out.read_text())
    assert "full_text_reference" in metrics and metrics["selection_rate"] > 0
    predicted = invoke("predict", second, "demo", "--out", tmp_path / "p.jsonl")
    assert predicted.exit_code == 0, predicted.output
    lines = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert lines and all(line["rationale"] for line in lines)
    reported = invoke("report", second, "--out", tmp_path / "report.html")
    assert reported.exit_code == 0, reported.output
    assert f"hardkuma (fixed, --support {support})" in (tmp_path / "report.html").read_text()


def test_a_support_without_a_budget_or_not_a_run_is_one_error_line(tmp_path):
    trained_on_part_of_demo(tmp_path / "full", extractor="full", reference=False)
    result = invoke("train", "--data", "demo", "--out", tmp_path / "second", "--support", tmp_path / "full")
    assert result.exit_code == 2
    assert "has no budget that sizes its rationales" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "second").exists()
    missing = invoke("train", "--data", "demo", "--out", tmp_path / "third", "--support", tmp_path / "nothing")
    assert missing.exit_code == 2 and "not a run directory" in missing.output


def test_the_saliency_selector_keeps_the_budget_s_best_tokens_by_its_table_and_window():
    """Each token scores its word's saliency times (1 + log n) / n for a word seen n times in its
    document (window 1), or the mean over a window of 3 with padding counted as 0; a document
    keeps round(budget x length) tokens of highest score, never padding; the scores shown are
    over the document's highest."""
    from rationale_cli.models.selectors.saliency import SaliencySelector

    selector = SaliencySelector(6, budget=0.5)
    selector.table.copy_(torch.tensor([0.0, 0.0, 1.0, 5.0, 2.0, 3.0]))
    ids = torch.tensor([[2, 3, 4, 5, 0, 0], [5, 2, 2, 3, 4, 2]])
    mask = (ids > 0).float()
    z, scores = selector.decode_with_scores(ids, mask)
    assert z.tolist() == [[0, 1, 0, 1, 0, 0], [1, 0, 0, 1, 1, 0]]
    assert scores.amax(-1).tolist() == [1.0, 1.0] and float(scores[0, 1]) == 1.0
    thrice = (1 + math.log(3)) / 3  # word 2 in the second document
    assert torch.allclose(selector.scores(ids, mask)[1], torch.tensor([3.0, thrice, thrice, 5.0, 2.0, thrice]))
    windowed = SaliencySelector(6, budget=1, window=3)
    windowed.table.copy_(selector.table)
    assert torch.allclose(windowed.scores(ids, mask)[0], torch.tensor([6, 8, 10, 5, 0, 0]) / 3)
    assert windowed.decode(ids, mask)[0].tolist() == [0, 0, 1, 0, 0, 0]


def test_word_saliency_is_the_unigram_weight_times_idf():
    """A word's saliency is |w| idf of its unigram feature (any case), 0 without one."""
    from rationale_cli.runs.reference import fit_reference
    from rationale_cli.runs.task import Regression

    train, valid = sources.load("demo", "train")[:300], sources.load("demo", "valid")[:60]
    reference = fit_reference(train, valid, Regression())
    word = next(w for w in reference.vocabulary if " " not in w)
    i = reference.vocabulary.index(word)
    expected = abs(float(reference.weights[0, i])) * float(reference.idf[i])
    assert reference.word_saliency([word, word.upper(), "never-a-word"]).tolist() == \
        pytest.approx([expected, expected, 0.0])


def test_support_reference_selects_by_the_run_s_own_reference_and_stays_fixed(tmp_path):
    """``--support reference``: the extractor is ``saliency``, its table the saved reference's
    word saliency (unchanged by training), the rationale in tokens at the budget; the config keeps
    the word 'reference', not a path; the run predicts and evaluates like any other."""
    from rationale_cli.runs.run_directory import load_reference

    trained_on_part_of_demo(tmp_path / "run", support="reference", predictor_encoder="bow", budget=0.25, lr=0.01)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["extractor"] == "saliency" and config["support"] == "reference"
    run = rationale.load(tmp_path / "run")
    table = run.model.selector.table
    assert torch.equal(table, torch.from_numpy(load_reference(tmp_path / "run").word_saliency(run.vocab.itos)))
    assert not any(p.requires_grad for p in run.model.selector.parameters())
    records = sources.load("demo", "test")[:20]
    for record, out in zip(records, run.predict(records)):
        ids = run.vocab.encode(record.tokens)
        seen = Counter(ids)  # a word seen n times scores its saliency x (1 + log n) / n per occurrence
        score = torch.tensor([float(table[i]) * (1 + math.log(seen[i])) / seen[i] for i in ids])
        kept = max(1, int(len(record.tokens) * 0.25 + 0.5))
        assert sum(out.selected) == kept
        chosen = score[torch.tensor(out.selected, dtype=torch.bool)]
        assert float(chosen.min()) >= float(score[~torch.tensor(out.selected, dtype=torch.bool)].max()) - 1e-6 or \
            float(chosen.min()) == 0.0
    result = invoke("evaluate", tmp_path / "run", "demo", "--no-faithfulness", "--json", tmp_path / "m.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "m.json").read_text())["selection_rate"] == pytest.approx(0.25, abs=0.01)


def test_support_budget_decodes_the_support_at_another_size(runs, tmp_path):
    support, _ = runs
    trained_on_part_of_demo(tmp_path / "larger", support=str(support), support_budget=0.4, support_sentences=False,
                            predictor_encoder="linear", reference=False)
    config = json.loads((tmp_path / "larger" / "config.json").read_text())
    assert config["support_budget"] == 0.4 and config["budget"] == 0.2  # the support's own, as it was trained
    # a fixed selector holds no rate: patience counts every epoch, whatever size it decodes at
    assert rationale.load(tmp_path / "larger").config.keep_rule().held is None
    records = sources.load("demo", "test")[:20]
    kept = [sum(out.selected) for out in rationale.load(tmp_path / "larger").predict(records)]
    assert kept == [max(1, int(0.4 * len(r.tokens) + 0.5)) for r in records]
    metrics = json.loads((tmp_path / "larger" / "metrics.json").read_text())
    rate = [panel for panel in training_panels(metrics, config) if panel.title == "selection rate"]
    assert [(panel.target, panel.target_label) for panel in rate] == [(0.4, "support_budget 40%")]
    # a two-stage run as the support: its selector, at the size that run decodes at
    trained_on_part_of_demo(tmp_path / "chained", support=str(tmp_path / "larger"), support_sentences=False,
                            predictor_encoder="linear", reference=False)
    chained = [sum(out.selected) for out in rationale.load(tmp_path / "chained").predict(records)]
    assert chained == kept


@pytest.mark.parametrize("options, line", [
    (["--support", "RUN", "--budget", "0.3"], "leave out --budget (to decode its rationales at another size: "
                                              "--support-budget)"),
    (["--support", "RUN", "--extractor", "simple", "--tau", "0.5"], "leave out --extractor, --tau"),
    (["--support", "RUN", "--hidden-size", "50", "--embeddings", "v.txt"], "leave out --embeddings, --hidden-size"),
    (["--support-budget", "0.3"], "--support-budget applies only with --support"),
    (["--no-support-sentences"], "--support-sentences applies only with --support"),
    (["--support", "reference", "--support-budget", "0.3"], "sized by --budget; leave out --support-budget"),
])
def test_options_a_support_would_drop_unseen_are_one_error_line(runs, tmp_path, options, line):
    """A support run's selector is fixed with its own extractor and options: one given here
    would change nothing, so it is refused rather than dropped."""
    support, _ = runs
    options = [str(support) if option == "RUN" else option for option in options]
    result = invoke("train", "--data", "demo", "--out", tmp_path / "run", *options)
    assert result.exit_code == 2 and line in result.output and "Traceback" not in result.output, result.output
    assert not (tmp_path / "run").exists()


def test_tune_of_a_support_run_searches_only_what_changes_it(tmp_path):
    """The support's selector, vocabulary and sizes are fixed: a study searches the other
    training options, with a note, and keeps each trial's best epoch by loss alone (a fixed
    selector holds no rate)."""
    from rationale_cli.runs.config import FROM_SUPPORT, TRAIN_SPECS
    from rationale_cli.tuning.job import plan_study

    support = tmp_path / "support"
    trained_on_part_of_demo(support, extractor="corr-topk", budget=0.2, reference=False)
    notes = []
    plan = plan_study({"data": "demo", "support": str(support), "predictor_encoder": "bow"}, note=notes.append)
    assert plan.space.names() and set(plan.space.names()) <= set(TRAIN_SPECS) - set(FROM_SUPPORT)
    assert "lr" in plan.space.names() and "hidden_size" not in plan.space.names()
    assert any("--hidden-size" in line and "not searched: the support run's own, fixed" in line for line in notes)
    assert plan.keep.target is None and plan.config.keep == "best-loss"
    assert plan.extractor == "corr-topk"  # the support's, shown on the leaderboard


@pytest.mark.parametrize("options, line", [
    (["--extractor", "saliency"], "--extractor saliency is fixed, never trained"),
    (["--support", "reference", "--extractor", "hardkuma"], "leave out --extractor hardkuma"),
    (["--support", "reference", "--no-reference"], "leave out --no-reference"),
])
def test_the_saliency_extractor_goes_with_support_reference_only(tmp_path, options, line):
    result = invoke("train", "--data", "demo", "--out", tmp_path / "run", *options)
    assert result.exit_code != 0 and line in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run" / "config.json").exists()


@pytest.mark.parametrize("extractor", ["simple", "corr-topk", "sparsemap", "attention"])
def test_a_support_decodes_at_its_budget_whatever_the_budget_is_for(tmp_path, extractor):
    """An exact size (k-subsets), a cap (SparseMAP) or a test-time size (attention) sizes the
    support's rationale as a held rate does: the new run decodes each document at it."""
    trained_on_part_of_demo(tmp_path / "support", extractor=extractor, budget=0.2, reference=False)
    trained_on_part_of_demo(tmp_path / "second", support=str(tmp_path / "support"), support_sentences=False,
                            predictor_encoder="linear", reference=False)
    run = rationale.load(tmp_path / "second")
    records = sources.load("demo", "test")[:20]
    kept = [sum(out.selected) for out in run.predict(records)]
    assert kept == [max(1, int(0.2 * len(r.tokens) + 0.5)) for r in records]
