"""The beer benchmark's training sets (pooled reviews, word2vec text), on small made-up review files."""

import gzip
import json
from pathlib import Path

import pytest

from rationale_cli.data.readers import read_records
from rationale_cli.data.word2vec import distinct_texts
from rationale_cli.training.trainer import split_validation
from tests.helpers import load_script, trained_on_part_of_demo


def write_heldout(folder: Path, aspect: int, reviews: list[tuple[list[float], str]]) -> None:
    with gzip.open(folder / f"reviews.aspect{aspect}.heldout.txt.gz", "wt") as handle:
        for scores, text in reviews:
            handle.write(" ".join(f"{s:.2f}" for s in scores) + "\t" + text + "\n")


def test_pooled_split_keeps_validation_apart_and_takes_each_review_once(tmp_path):
    beer = tmp_path / "beer"
    beer.mkdir()
    own = [([0.1 * (i % 10), 0.5, 0.5, 0.5, 0.5], f"own review {i}") for i in range(40)]
    write_heldout(beer, 0, own)
    valid_texts = {" ".join(r.tokens) for r in split_validation(read_records(beer / "reviews.aspect0.heldout.txt.gz", "beer", aspect=0), 0.1)[1]}
    a_valid_text = sorted(valid_texts)[0]
    # another aspect's file: new reviews, one repeat of a training review, one of a validation review,
    # and a review repeated inside the file
    others = [([0.9, 0.2, 0.2, 0.2, 0.2], f"other review {i}") for i in range(5)]
    others += [([0.0, 0.0, 0.0, 0.0, 0.0], "own review 3" if "own review 3" not in valid_texts else "own review 4"),
               ([0.0, 0.0, 0.0, 0.0, 0.0], a_valid_text), ([0.9, 0.2, 0.2, 0.2, 0.2], "other review 0")]
    write_heldout(beer, 1, others)

    train_file, valid_file, size = load_script("beer").pooled_split(beer, 0, tmp_path / "pooled")
    train = [json.loads(line) for line in train_file.read_text().splitlines()]
    valid = [json.loads(line) for line in valid_file.read_text().splitlines()]
    train_texts = [" ".join(r["tokens"]) for r in train]
    assert {" ".join(r["tokens"]) for r in valid} == valid_texts
    assert size == len(train) == 36 + 5
    assert len(set(train_texts)) == len(train_texts)
    assert not set(train_texts) & valid_texts
    # labels are aspect 0's score, from whichever file the review came from
    assert all(r["score"] == 0.9 for r in train if r["tokens"][0] == "other")


def test_word2vec_corpus_is_the_review_text_of_every_heldout_file_once(tmp_path):
    write_heldout(tmp_path, 0, [([0.5] * 5, "a fine head"), ([0.1] * 5, "thin body")])
    write_heldout(tmp_path, 1, [([0.9] * 5, "a fine head"), ([0.3] * 5, "sweet nose")])
    (tmp_path / "annotations.json").write_text('{"x": ["test", "review"]}\n')
    files = sorted(tmp_path.glob("reviews.aspect*.heldout.txt.gz"))  # what beer_vectors.py hands `rationale vectors`
    texts = distinct_texts(r for path in files for r in read_records(path, "beer"))
    assert sorted(texts) == [["a", "fine", "head"], ["sweet", "nose"], ["thin", "body"]]


def test_subset_split_is_the_start_of_the_training_split_with_the_same_validation(tmp_path):
    beer = tmp_path / "beer"
    beer.mkdir()
    write_heldout(beer, 1, [([0.5, 0.1 * (i % 10), 0.5, 0.5, 0.5], f"review {i}") for i in range(40)])
    train, valid = split_validation(read_records(beer / "reviews.aspect1.heldout.txt.gz", "beer", aspect=1), 0.1)
    train_file, valid_file, size = load_script("beer").subset_split(beer, 1, 9, tmp_path / "subset")
    rows = [json.loads(line) for line in train_file.read_text().splitlines()]
    assert size == 9 and [r["tokens"] for r in rows] == [r.tokens for r in train[:9]]
    assert [r["score"] for r in rows] == [r.label for r in train[:9]]
    assert [json.loads(line)["tokens"] for line in valid_file.read_text().splitlines()] == [r.tokens for r in valid]


def test_false_positives_are_counted_by_the_other_aspects_gold(tmp_path):
    spans = {"0": [[0, 2]], "1": [[2, 4]], "3": [[3, 5]], "4": [[0, 1]]}  # token 3 is aroma and taste gold
    (tmp_path / "a.json").write_text(json.dumps({"x": list("abcdefg"), "y": [0.5] * 5, **spans}) + "\n")
    errors = load_script("beer_errors")
    by_aspect = [read_records(tmp_path / "a.json", "beer-annotations", aspect=a) for a in range(5)]
    counts = errors.false_positives(by_aspect, 0, [[1, 0, 1, 1, 0, 1, 0]])
    assert counts == {"selected": 4, "true": 1, "aroma": 2, "palate": 0, "taste": 1, "overall": 0, "outside": 1}
    assert [errors.spans(z) for z in ([1, 0, 1, 1, 0, 1, 0], [0, 1, 1], [0, 0], [])] == [3, 1, 0, 0]


def test_keep_rules_looks_up_the_epoch_each_rule_keeps():
    from rationale_cli.runs.keep import Keep

    chosen_epoch = load_script("keep_rules").chosen_epoch
    history = [{"epoch": 1, "valid_loss": 0.05, "valid_selection_rate": 0.13},
               {"epoch": 2, "valid_loss": 0.03, "valid_selection_rate": 0.20},  # lowest loss, far off the rate
               {"epoch": 3, "valid_loss": 0.04, "valid_selection_rate": 0.12},
               {"epoch": 4, "valid_loss": 0.04, "valid_selection_rate": 0.125}]  # ties epoch 3: the earlier
    assert chosen_epoch(history, Keep()) == 2
    assert chosen_epoch(history, Keep(0.13, 0.02)) == 3
    assert chosen_epoch(history, Keep(0.13, 0.005)) == 4
    assert chosen_epoch(history, Keep(0.13, 0.001)) == 1


def test_report_setup_shows_what_sets_a_configuration_apart():
    report = load_script("report")
    script = ("python benchmarks/beer.py --extractor sparsemap --aspects 0 --seeds 0 --epochs 5 --budget 0.13 "
              "-- --pairwise --encoder cnn --hidden-size 100 --batch-size 16 --lr 0.001 --device cpu "
              "--max-support 4 --save-epochs --time-limit 95")
    assert report.setup({"script": script}) == "5 epochs `--pairwise --batch-size 16 --lr 0.001 --max-support 4`"
    assert report.setup({"script": "python benchmarks/beer.py --extractor full --epochs 3"}) == "3 epochs"
    assert report.setup({"script": "python benchmarks/beer.py -- --k 10 --device cuda"}) == ""


def test_report_groups_runs_of_one_configuration_whatever_the_order_folders_or_seeds():
    report = load_script("report")
    first = ("python benchmarks/beer.py --data-dir ../shared/data --extractor simple --aspects 0 --seeds 0 --epochs 20 "
             "--runs /tmp/a -- --batch-size 100 --lr 0.001 --k 10 --time-limit 33")
    later = ("python benchmarks/beer.py --extractor simple --aspects 0 --seeds 1 2 --data-dir /data --runs /tmp/b "
             "--epochs 20 -- --lr 0.001 --batch-size 100 --time-limit 30")

    def key(script, device="cpu"):
        return report.configuration({"script": script, "device": device})

    assert key(first) == key(later)
    assert key(later) != key(later.replace("--lr 0.001", "--lr 0.002"))
    assert key(later) != key(later.replace("-- --lr", "--pooled -- --lr"))
    # the device a run resolved to counts, not whether the command named it
    assert key(later) == key(later.replace("-- --lr", "-- --device cpu --lr"))
    assert key(later, "NVIDIA H200") != key(later)


def test_report_summary_compares_a_rate_extractor_at_the_protocol_rate_and_blind_decodings_only():
    report = load_script("report")

    def row(precision, rate, options="", **extra):
        return {"benchmark": "beer", "extractor": "sparsemap", "encoder": "cnn", "aspect": 1, "selection_target": 0.07,
                "k": None, "train_size": 9000, "vectors": report.PROTOCOL_VECTORS, "precision": precision,
                "recall": 0.5, "f1": 0.5, "selection_rate": rate, "mse": 0.02, "seed": 0,
                "script": f"python benchmarks/beer.py --extractor sparsemap --aspects 1 -- --lr 0.001{options}", **extra}

    def best(rows):
        (line,) = report.summary_table(rows)[2:]
        return line.split(" | ")[7]

    rows = [row(0.70, 0.068), row(0.80, 0.045, " --max-support 2")]
    assert best(rows) == "70.0"  # the more precise run selected 4.5%, not about 7%
    assert best(rows[1:]) == "80.0"  # the only one there is
    assert best(rows + [row(0.95, 0.07, " --max-support 4", test_coherence=2.0)]) == "70.0"  # cost chosen on test


def test_cross_fit_pools_per_document_rows_as_evaluate_does(tmp_path):
    from typer.testing import CliRunner

    from rationale_cli.cli import app

    cross_fit = load_script("cross_fit")
    runner = CliRunner()
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", "--data", "demo", "--out", str(run), "--epochs", "1", "--encoder", "cnn",
                                 "--extractor", "topk-sparsemax", "--embedding-dim", "8", "--hidden-size", "8"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["evaluate", str(run), "demo", "--coherence", "1", "--json", str(tmp_path / "m.json"),
                                 "--per-document", str(tmp_path / "d.jsonl")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "m.json").read_text())
    rows = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    mine = cross_fit.pooled(rows)
    assert 0 < mine["selection_rate"] < 1 and mine["precision"] is not None
    for key in ("precision", "recall", "f1", "selection_rate", "mse"):
        assert mine[key] == pytest.approx(metrics[key], rel=1e-6), key
    for key in ("comprehensiveness", "sufficiency"):
        assert mine["faithfulness"][key] == pytest.approx(metrics["faithfulness"][key], rel=1e-6), key


def test_cross_fit_decodes_each_half_with_the_setting_best_on_the_other_half():
    cross_fit = load_script("cross_fit")
    ids = [f"d{i}" for i in range(20)]
    first, second = cross_fit.halves(ids)
    assert first | second == set(ids) and not first & second and len(first) == 10
    assert cross_fit.halves(ids) == (first, second) and cross_fit.halves(ids, seed=1) != (first, second)

    def row(doc, overlap):
        return {"id": doc, "tokens": 10, "selected": 4, "gold": 5, "overlap": overlap, "label": 0.5,
                "prediction": 0.5}
    # "a" is precise on the first half only, "b" on the second only
    rows = {"a": [row(d, 3 if d in first else 0) for d in ids], "b": [row(d, 3 if d in second else 1) for d in ids]}
    scores, chosen = cross_fit.cross_fit(rows)
    assert chosen == ["b", "a"]  # the first half gets the second half's best, and the other way round
    assert scores["precision"] == pytest.approx((10 * 1 + 10 * 0) / 80)
    assert scores["documents"] == 20 and scores["selection_rate"] == pytest.approx(0.4)
    same = {"a": rows["a"], "b": rows["a"]}
    assert cross_fit.cross_fit(same)[1] == ["a", "a"]  # ties keep the first setting
    # "c" is precise everywhere but selects a tenth of the tokens, where "a" and "b" select 40%
    rows["c"] = [{**row(d, 1), "selected": 1} for d in ids]
    assert cross_fit.cross_fit(rows)[1] == ["c", "c"]
    assert cross_fit.cross_fit(rows, rate=0.4)[1] == ["b", "a"]
    assert cross_fit.cross_fit(rows, rate=0.1)[1] == ["c", "c"]
    assert cross_fit.cross_fit(rows, rate=0.25, tolerance=0.1)[1] == ["a", "a"]  # none fits: the first


def test_report_summary_takes_a_search_s_configuration_by_validation_not_test():
    report = load_script("report")

    def row(precision, valid_mse, options, search="paper-space", **extra):
        searched = f" --search {search}" if search else ""
        return {"benchmark": "beer", "extractor": "topk", "encoder": "sst-complex", "aspect": 1,
                "selection_target": None, "k": 10, "train_size": 9000, "vectors": report.PROTOCOL_VECTORS,
                "precision": precision, "recall": 0.3, "f1": 0.4, "selection_rate": 0.079, "mse": 0.016,
                "seed": 0, "valid_mse": valid_mse, "command": "rationale train ...",
                "script": f"python benchmarks/beer.py --extractor topk --aspects 1{searched} -- {options}",
                **({"search": search} if search else {}), **extra}

    def summary(rows):
        (line,) = report.summary_table(rows)[2:]
        cells = line.split(" | ")
        return cells[4], cells[7]

    searched = [row(0.60, 0.034, "--lr 0.01"), row(0.55, 0.030, "--lr 0.001"), row(0.50, 0.031, "--lr 0.003")]
    setup, precision = summary(searched)
    assert precision == "55.0"  # the lowest validation MSE, not the most precise on test
    assert "the lowest validation MSE of 3 configurations (search paper-space)" in setup
    # a configuration outside the search still competes on its own
    assert summary(searched + [row(0.57, 0.040, "--lr 0.0005", search=None)])[1] == "57.0"
    # the same options searched twice are two searches, each choosing its own
    assert summary(searched + [row(0.58, 0.020, "--lr 0.01", search="other")])[1] == "58.0"
    unvalidated = row(0.9, None, "--lr 0.1")
    with pytest.raises(ValueError, match="without valid_mse"):
        report.summary_table(searched + [unvalidated])


def test_report_target_names_every_run_s_cross_fitted_costs():
    report = load_script("report")

    def run(*chosen):
        return {"extractor": "topk-sparsemax", "selection_target": 0.13, "script": "",
                "coherence_cross_fit": {"chosen": list(chosen)}}

    assert report.shown_target([run(8.0, 4.0)]) == "13%, decoded with coherence 8 / 4 cross-fit"
    assert (report.shown_target([run(8.0, 4.0), run(8.0, 4.0), run(0.5, 8.0)])
            == "13%, decoded with coherence 8 / 4; 0.5 / 8 cross-fit")
    gridded = run(16.0, 8.0)
    gridded["coherence_cross_fit"]["costs"] = [0.0, 0.5, 8.0, 16.0, 32.0]
    assert report.shown_target([gridded]) == "13%, decoded with coherence 16 / 8 cross-fit over costs 0-32"


def test_report_summary_takes_a_run_s_widest_cross_fitted_grid_only():
    report = load_script("report")

    def row(precision, costs, folder="/runs/a", evaluate_only=True):
        again = " --evaluate-only" if evaluate_only else ""
        return {"benchmark": "beer", "extractor": "topk-sparsemax", "encoder": "rcnn", "aspect": 2,
                "selection_target": 0.07, "k": None, "train_size": 9000, "vectors": report.PROTOCOL_VECTORS,
                "precision": precision, "recall": 0.4, "f1": 0.5, "selection_rate": 0.07, "mse": 0.02, "seed": 0,
                "command": f"rationale train --out {folder} && rationale evaluate {folder}",
                "coherence_cross_fit": {"costs": costs, "chosen": [costs[-1], costs[-1]], "rate": 0.07},
                "script": "python benchmarks/beer.py --extractor topk-sparsemax --aspects 2 "
                          f"--tune-coherence {' '.join(f'{c:g}' for c in costs)}{again} -- --lr 0.001"}

    def best(rows):
        (line,) = report.summary_table(rows)[2:]
        return line.split(" | ")[7]

    narrow, wide = row(0.70, [0.0, 4.0, 8.0], evaluate_only=False), row(0.66, [0.0, 4.0, 8.0, 16.0])
    assert best([narrow, wide]) == "66.0"  # not the grid more precise on test
    assert best([narrow]) == "70.0"
    # the folder trained again, or another folder, is another model
    assert best([narrow, row(0.66, [0.0, 4.0, 8.0, 16.0], evaluate_only=False)]) == "70.0"
    assert best([narrow, row(0.60, [0.0]), wide]) == "66.0"
    assert best([narrow, row(0.66, [0.0, 4.0, 8.0, 16.0], folder="/runs/b")]) == "70.0"
    assert best([narrow, row(0.66, [0.0, 4.0])]) == "70.0"  # a narrower grid supersedes nothing


def test_the_binary_protocol_drops_middling_ratings_balances_training_and_keeps_every_test_review(tmp_path):
    beer = tmp_path / "beer"
    beer.mkdir()
    # aspect 0's ratings 0.0 ... 0.9 in turn: 0.5 is dropped, 0.0-0.4 negative, 0.6-0.9 positive
    write_heldout(beer, 0, [([0.1 * (i % 10), 0.5, 0.5, 0.5, 0.5], f"review {i}") for i in range(60)])
    annotated = [{"x": ["head", "white", "."], "y": [y, 0.5, 0.5, 0.5, 0.5], "0": spans, "rid": i}
                 for i, (y, spans) in enumerate([(0.8, [[0, 2]]), (0.5, [[0, 1]]), (0.2, []), (0.6, [[1, 3]])])]
    (beer / "annotations.json").write_text("\n".join(json.dumps(a) for a in annotated) + "\n")
    script = load_script("beer_binary")
    assert [script.binary(s) for s in (0.0, 0.4, 0.5, 0.6, 1.0)] == ["negative", "negative", None, "positive",
                                                                    "positive"]
    files = script.protocol_files(beer, 0, tmp_path / "out", balance=True, size=None)
    rows = {name: [json.loads(line) for line in files[name].read_text().splitlines()]
            for name in ("train", "valid", "test")}
    for name in ("train", "valid"):
        labels = [r["label"] for r in rows[name]]
        assert labels.count("positive") == labels.count("negative") == files["negatives"][name] > 0
    assert files["sizes"]["train"] + files["sizes"]["valid"] < 60 * 9 / 10
    assert [(r["label"], r["rationale"]) for r in rows["test"]] == [("positive", [[0, 2]]), ("negative", []),
                                                                    ("positive", [[1, 3]])]
    # --train-size N: the first N/2 of each class, in the balanced reviews' order
    part = script.protocol_files(beer, 0, tmp_path / "part", balance=True, size=10)
    kept = [json.loads(line) for line in part["train"].read_text().splitlines()]
    assert [r["label"] for r in kept].count("negative") == 5 == len(kept) - 5
    first = {r["id"] for c in ("positive", "negative") for r in [x for x in rows["train"] if x["label"] == c][:5]}
    assert {r["id"] for r in kept} == first
    unbalanced = script.protocol_files(beer, 0, tmp_path / "all", balance=False, size=None)
    assert unbalanced["sizes"]["train"] == 60 * 9 // 10 * 9 // 10 and unbalanced["sizes"]["valid"] == files["sizes"]["valid"]
    # --labels score: the same reviews, each labelled with its rating
    rated = script.protocol_files(beer, 0, tmp_path / "score", balance=True, size=None, score=True)
    assert rated["sizes"] == files["sizes"] and rated["negatives"] == files["negatives"]
    for name in ("train", "valid", "test"):
        scored = [json.loads(line) for line in rated[name].read_text().splitlines()]
        assert [r["id"] for r in scored] == [r["id"] for r in rows[name]]
        assert [script.binary(r["score"]) for r in scored] == [r["label"] for r in rows[name]]
    assert [r["score"] for r in scored] == [0.8, 0.2, 0.6]


def test_the_pooled_binary_protocol_trains_on_every_heldout_file_and_takes_half_of_n_from_each_class(tmp_path):
    beer = tmp_path / "beer"
    beer.mkdir()
    write_heldout(beer, 0, [([0.1 * (i % 10), 0.5, 0.5, 0.5, 0.5], f"review {i}") for i in range(60)])
    write_heldout(beer, 1, [([0.9 if i % 3 else 0.1, 0.5, 0.5, 0.5, 0.5], f"other {i}") for i in range(30)])
    (beer / "annotations.json").write_text(json.dumps({"x": ["a"], "y": [0.8] * 5, "0": [], "rid": 0}) + "\n")
    script = load_script("beer_binary")
    own = script.protocol_files(beer, 0, tmp_path / "own", balance=True, size=None)
    pooled = script.protocol_files(beer, 0, tmp_path / "pooled", balance=True, size=None, pooled=True)
    assert pooled["valid"].read_text() == own["valid"].read_text()
    rows = [json.loads(line) for line in pooled["train"].read_text().splitlines()]
    labels, texts = [r["label"] for r in rows], [" ".join(r["tokens"]) for r in rows]
    assert labels.count("positive") == labels.count("negative") > own["negatives"]["train"]
    assert any(text.startswith("other") for text in texts) and len(set(texts)) == len(texts)
    valid_texts = {" ".join(json.loads(line)["tokens"]) for line in own["valid"].read_text().splitlines()}
    assert not valid_texts & set(texts)
    part = script.protocol_files(beer, 0, tmp_path / "part", balance=True, size=10, pooled=True)
    labels = [json.loads(line)["label"] for line in part["train"].read_text().splitlines()]
    assert labels.count("positive") == labels.count("negative") == 5


def test_every_binary_decoding_is_one_evaluate_accepts_and_the_best_validation_score_is_chosen(tmp_path):
    run = tmp_path / "run"
    trained_on_part_of_demo(run, extractor="attention", reference=False)
    script = load_script("beer_binary")
    names = list(script.DECODINGS)
    chosen, scores = script.chosen_decoding(run, Path("demo"), names, 0.2, reuse=False, metric="mse")  # demo: ratings
    assert set(scores) == set(names) and all((run / f"valid_metrics-{name}.json").is_file() for name in names)
    assert scores[chosen]["mse"] == min(score["mse"] for score in scores.values())
    assert all(abs(scores[name]["selection_rate"] - 0.2) < 0.01 for name in ("rate", "rate-corpus"))
    assert abs(scores["own"]["selection_rate"] - 0.2) > 0.01  # the rate decodings moved it there


def test_the_binary_protocol_gives_a_budget_only_to_extractors_that_take_one():
    script = load_script("beer_binary")
    assert script.budget_options("hardkuma", 0.185) == ("--budget", "0.185")
    assert script.budget_options("sparse-attention", 0.185) == ()  # its support size is its own
