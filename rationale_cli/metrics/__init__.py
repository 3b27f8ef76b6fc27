"""Pure scores over predictions and masks: the toolkit's task and token scores (``scores``)
and ERASER's metric definitions (``eraser_scores``). No model, no files."""
