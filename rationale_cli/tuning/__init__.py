"""Hyperparameter search over training runs (``rationale tune``), on Optuna.

``space``: the search space, declared beside the options (:mod:`rationale_cli.models.search`) and changed by
a file; ``storage``: Optuna, imported only here and only when a search runs, and the study in
its database; ``objective``: one trial, a normal run directory trained by
:func:`rationale_cli.training.trainer.train_config`; ``leaderboard``: the trials as records, the
rule that chooses the best and the leaderboard file (no Optuna needed to read it); ``job``: the
search as one library call, :func:`rationale_cli.tuning.job.tune`, which ``rationale tune`` and
:func:`rationale_cli.api.tune` both call.
"""
