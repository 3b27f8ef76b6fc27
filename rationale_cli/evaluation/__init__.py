"""Scoring rationales and predictions: the toolkit's token metrics (``metrics``),
ERASER's metrics (``eraser``), prediction and results files (``results``), the
reruns of a model for faithfulness (``faithfulness``) and what ``evaluate`` and
``score`` report (``scoring``)."""
