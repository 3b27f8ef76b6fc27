"""ERASER's metrics on small cases computed by hand."""

import math

import pytest

from rationale_cli.metrics.eraser_scores import (
    ScoredDocument,
    average_precision,
    classification_scores,
    eraser_scores,
    iou_scores,
    pr_auc,
    roc_auc,
    soft_scores,
    span_prf,
    token_prf,
)


def doc(gold, spans, length=20, **fields):
    return ScoredDocument(id=str(len(gold or [])) + str(spans), length=length, gold=gold, spans=spans, **fields)


def test_token_prf_with_empty_gold_and_empty_selection():
    docs = [
        doc([(0, 4)], [(2, 6)]),  # 2 of 4 selected are gold: P = R = F1 = 1/2
        doc([(0, 2)], []),  # nothing selected: P = 0, R = 0 in the macro average
        doc([], [(0, 1)]),  # empty gold: P = 0, R = 0
        doc([], []),  # neither: left out of the macro average
        doc(None, [(0, 5)]),  # no gold annotation at all: not scored
    ]
    scores = token_prf(docs)
    micro, macro = scores["instance_micro"], scores["instance_macro"]
    assert micro["p"] == pytest.approx(2 / 5) and micro["r"] == pytest.approx(2 / 6)
    assert micro["f1"] == pytest.approx(2 * 0.4 * (1 / 3) / (0.4 + 1 / 3))
    assert macro["p"] == pytest.approx(0.5 / 3) and macro["r"] == pytest.approx(0.5 / 3)
    assert macro["f1"] == pytest.approx(0.5 / 3)  # the mean of per-document F1s


def test_overlapping_gold_spans_count_their_tokens_once():
    scores = token_prf([doc([(0, 3), (2, 5)], [(0, 5)])])
    assert scores["instance_micro"] == {"p": 1.0, "r": 1.0, "f1": 1.0}


def test_exact_span_match_uses_distinct_spans():
    scores = span_prf([doc([(0, 2), (5, 7), (5, 7)], [(0, 2), (4, 7)])])
    assert scores["instance_micro"]["p"] == 0.5 and scores["instance_micro"]["r"] == 0.5


def test_iou_partial_matches():
    docs = [
        # (1,4) against (0,4): IOU 3/4, a match; (11,14) against (10,12): 1/4, not one
        doc([(0, 4), (10, 12)], [(1, 4), (11, 14)]),
        # an empty annotated span still counts for recall; nothing predicted
        doc([(3, 3)], []),
    ]
    (scores,) = iou_scores(docs, [0.5])
    assert scores["micro"]["p"] == pytest.approx(1 / 2) and scores["micro"]["r"] == pytest.approx(1 / 3)
    assert scores["micro"]["f1"] == pytest.approx(0.4)
    assert scores["macro"]["r"] == pytest.approx(0.25) and scores["macro"]["p"] == pytest.approx(0.5)
    assert scores["macro"]["f1"] == pytest.approx(2 * 0.25 * 0.5 / 0.75)  # F1 of the averages
    (strict,) = iou_scores(docs, [0.8])
    assert strict["micro"]["p"] == 0.0 and strict["micro"]["f1"] == 0.0


def test_iou_at_exactly_the_threshold_is_a_match():
    (scores,) = iou_scores([doc([(0, 4)], [(2, 4)])], [0.5])  # IOU 2/4
    assert scores["micro"]["p"] == 1.0


def test_soft_metrics_with_tied_scores():
    truth, scores = [1, 0, 1, 0], [0.9, 0.9, 0.5, 0.1]
    # the tied pair enters together: (R, P) = (1/2, 1/2), then (1, 2/3), then (1, 1/2)
    assert pr_auc(truth, scores) == pytest.approx(0.5 * (1 + 0.5) / 2 + 0.5 * (0.5 + 2 / 3) / 2)
    assert average_precision(truth, scores) == pytest.approx(0.5 * 0.5 + 0.5 * 2 / 3)
    # positive/negative pairs: tie (1/2), win, loss, win
    assert roc_auc(truth, scores) == pytest.approx(2.5 / 4)


def test_soft_metrics_leave_out_single_class_documents_where_undefined():
    docs = [
        ScoredDocument("a", 4, gold=[(0, 1), (2, 3)], soft=[0.9, 0.9, 0.5, 0.1]),
        ScoredDocument("b", 2, gold=[(0, 2)], soft=[0.3, 0.2]),  # all gold: AUPRC 1, no AP or ROC-AUC
        ScoredDocument("c", 2, gold=[], soft=[0.3, 0.2]),  # no gold token: nothing is defined
    ]
    scores = soft_scores(docs)
    assert scores["auprc"] == pytest.approx((pr_auc([1, 0, 1, 0], [0.9, 0.9, 0.5, 0.1]) + 1) / 2)
    assert scores["average_precision"] == pytest.approx(0.5 * 0.5 + 0.5 * 2 / 3)
    assert scores["roc_auc_score"] == pytest.approx(0.625)
    assert soft_scores([ScoredDocument("a", 2, gold=[(0, 1)])]) is None


def test_classification_faithfulness_and_aopc():
    base = {"A": 0.8, "B": 0.2}
    rows = [{"threshold": 0.1, "comprehensiveness_classification_scores": {"A": 0.5, "B": 0.5},
             "sufficiency_classification_scores": {"A": 0.6, "B": 0.4}},
            {"threshold": 0.5, "comprehensiveness_classification_scores": {"A": 0.3, "B": 0.7},
             "sufficiency_classification_scores": {"A": 0.9, "B": 0.1}}]
    docs = [ScoredDocument("x", 5, label="A", prediction="A", class_scores=base,
                           comprehensiveness={"A": 0.3, "B": 0.7}, sufficiency={"A": 0.9, "B": 0.1},
                           thresholded=rows),
            ScoredDocument("y", 5, label="A", prediction="B", class_scores={"A": 0.4, "B": 0.6},
                           comprehensiveness={"A": 0.4, "B": 0.6}, sufficiency={"A": 0.5, "B": 0.5},
                           thresholded=[{**row, "comprehensiveness_classification_scores": {"A": 0.5, "B": 0.5},
                                         "sufficiency_classification_scores": {"A": 0.5, "B": 0.5}}
                                        for row in rows])]
    scores = classification_scores(docs)  # AOPC over the documents' own bins
    assert scores["accuracy"] == 0.5
    assert scores["prf"]["A"] == {"precision": 1.0, "recall": 0.5, "f1-score": pytest.approx(2 / 3), "support": 2}
    assert scores["prf"]["B"]["precision"] == 0.0 and scores["prf"]["macro avg"]["recall"] == pytest.approx(0.25)
    assert scores["comprehensiveness"] == pytest.approx(((0.8 - 0.3) + (0.6 - 0.6)) / 2)
    assert scores["sufficiency"] == pytest.approx(((0.8 - 0.9) + (0.6 - 0.5)) / 2)
    points = [((0.8 - 0.5) + (0.6 - 0.5)) / 2, ((0.8 - 0.3) + (0.6 - 0.5)) / 2]
    assert scores["comprehensiveness_aopc_points"] == pytest.approx(points)
    assert scores["comprehensiveness_aopc"] == pytest.approx(sum(points) / 2)

    def h(p):
        return -sum(x * math.log(x) for x in p)
    assert scores["comprehensiveness_entropy"] == pytest.approx(((h([.8, .2]) - h([.3, .7])) + 0) / 2)
    kl = 0.3 * math.log(0.3 / 0.8) + 0.7 * math.log(0.7 / 0.2)
    assert scores["comprehensiveness_kl"] == pytest.approx(kl / 2)


def test_scores_are_absent_where_the_file_has_nothing_to_score():
    docs = [doc([(0, 2)], None, soft=None)]
    assert set(eraser_scores(docs, hard=False)) == set()
    assert set(eraser_scores([doc([(0, 2)], [(0, 1)])])) == {"iou_scores", "rationale_prf", "token_prf"}
