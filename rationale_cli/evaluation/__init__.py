"""Evaluation with a model or a predictions file: the reruns of a model for faithfulness
(``faithfulness``), prediction and results files (``predictions_file``) and what
``evaluate`` and ``score`` report (``scoring``)."""
