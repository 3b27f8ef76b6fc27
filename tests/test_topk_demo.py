"""Top-k and correlated top-k on the synthetic demo corpus: k = 11, the typical gold length
(one aspect sentence of about 11 tokens; the gold share is about 28%)."""

import pytest
from helpers import train_on_demo


@pytest.mark.slow
def test_correlated_top_k_is_precise_and_more_contiguous_than_top_k(tmp_path):
    options = ["--k", "11", "--encoder", "rcnn", "--epochs", "3"]
    corr = train_on_demo(tmp_path / "corr", "--extractor", "corr-topk", *options)
    plain = train_on_demo(tmp_path / "plain", "--extractor", "topk", *options)
    assert corr["precision"] > 0.85, corr
    # transitions per document: a single contiguous span has at most 2
    assert corr["transitions"] < 0.5 * plain["transitions"], (corr, plain)
