import numpy as np
import pytest

from rationale_cli.metrics.scores import (
    ClassificationScores,
    RationaleScores,
    RegressionScores,
    document_scores,
)


def approx(x):
    return pytest.approx(x, abs=1e-12)


def test_rationale_scores_micro_macro_by_hand():
    scores = RationaleScores()
    # doc 1: selected {0,1,4}, gold {0,3,4}: overlap 2, P = R = 2/3, 2 transitions
    scores.add([1, 1, 0, 0, 1], [1, 0, 0, 1, 1])
    # doc 2: selects 1 of 10 gold tokens: P = 1, R = 0.1, F1 = 2/11, 1 transition
    scores.add([True] + [False] * 9, [1] * 10)
    # doc 3: no gold, everything selected: selection rate only, 0 transitions
    scores.add([1, 1, 1, 1], None)
    # doc 4: nothing selected: precision undefined, recall 0, F1 0
    scores.add(np.zeros(3, dtype=int), [0, 1, 0])
    result = scores.result()

    assert result["documents"] == 4
    assert result["documents_with_gold"] == 3
    assert result["selection_rate"] == approx(8 / 22)
    # micro: overlap 3, selected 4 (docs with gold), gold 14
    assert result["precision"] == approx(3 / 4)
    assert result["recall"] == approx(3 / 14)
    assert result["f1"] == approx(1 / 3)
    # macro: doc 4 has no precision; it still counts for recall and F1
    assert result["precision_macro"] == approx((2 / 3 + 1) / 2)
    assert result["recall_macro"] == approx((2 / 3 + 0.1 + 0) / 3)
    assert result["f1_macro"] == approx((2 / 3 + 2 / 11 + 0) / 3)
    assert result["precision"] != result["precision_macro"]
    assert result["transitions"] == approx((2 + 1 + 0 + 0) / 4)


def test_document_scores_edge_cases():
    empty_gold = document_scores([1, 0], [0, 0])
    assert empty_gold["precision"] == 0.0 and empty_gold["recall"] is None and empty_gold["f1"] == 0.0
    both_empty = document_scores([0, 0], [0, 0])
    assert both_empty["precision"] is None and both_empty["recall"] is None and both_empty["f1"] is None
    no_gold = document_scores([0, 1, 1, 0, 1], None)
    assert no_gold["transitions"] == 3 and no_gold["precision"] is None and no_gold["gold"] is None
    assert document_scores([], [])["transitions"] == 0
    with pytest.raises(ValueError):
        document_scores([1, 0, 1], [1, 0])


def test_no_gold_anywhere_and_nothing_at_all():
    scores = RationaleScores()
    scores.add([0, 1, 0, 0], None)
    result = scores.result()
    assert result["selection_rate"] == approx(0.25)
    assert result["transitions"] == approx(2)
    for key in ("precision", "recall", "f1", "precision_macro", "recall_macro", "f1_macro"):
        assert result[key] is None
    assert result["documents_with_gold"] == 0

    empty = RationaleScores().result()
    assert empty["documents"] == 0
    assert empty["selection_rate"] is None and empty["transitions"] is None


def test_nothing_selected_with_gold():
    scores = RationaleScores()
    scores.add([0, 0, 0], [1, 1, 0])
    result = scores.result()
    assert result["selection_rate"] == 0.0
    assert result["precision"] is None and result["precision_macro"] is None
    assert result["recall"] == 0.0 and result["recall_macro"] == 0.0
    assert result["f1"] == 0.0 and result["f1_macro"] == 0.0  # F1 (Dice) is 0 with gold and nothing selected


def test_chance_levels_and_documents_with_empty_gold():
    scores = RationaleScores()
    scores.add([1, 0, 0, 0], [1, 1, 0, 0])
    scores.add([1, 0], [0, 0])  # annotated, nothing marked: counts for precision, not as a document with gold
    scores.add([1, 1, 1], None)
    result = scores.result()
    assert result["documents_with_gold"] == 1 and result["documents"] == 3
    assert result["precision"] == 0.5 and result["gold_share"] == 2 / 6


def test_regression_scores():
    scores = RegressionScores()
    for pred, gold in [(0.5, 0.7), (0.2, 0.2), (1.0, 0.6)]:
        scores.add(pred, gold)
    result = scores.result()
    gold_mean = (0.7 + 0.2 + 0.6) / 3
    chance = sum((g - gold_mean) ** 2 for g in (0.7, 0.2, 0.6)) / 3  # always predicting the mean
    assert result == {"mse": approx((0.04 + 0.16) / 3), "mae": approx(0.2), "mse_of_mean": approx(chance),
                      "documents": 3}
    assert RegressionScores().result()["mse"] is None


def test_classification_macro_f1_by_hand():
    scores = ClassificationScores(["pos", "neg", "neu", "unused"])
    pairs = [("pos", "pos"), ("pos", "neg"), ("neg", "neg"), ("neg", "neg"), ("pos", "pos"), ("neu", "pos")]
    for pred, gold in pairs:
        scores.add(pred, gold)
    result = scores.result()
    # pos: tp 2 fp 1 fn 1 -> 4/6; neg: tp 2 fp 0 fn 1 -> 4/5; neu: tp 0 fp 1 -> 0; unused never occurs
    assert result["f1_per_label"] == {"pos": approx(2 / 3), "neg": approx(4 / 5), "neu": 0.0}
    assert result["macro_f1"] == approx(22 / 45)
    assert result["accuracy"] == approx(4 / 6)
    assert result["majority_accuracy"] == approx(3 / 6)  # gold: pos 3, neg 3
    assert result["documents"] == 6
    assert ClassificationScores(["a"]).result()["accuracy"] is None

