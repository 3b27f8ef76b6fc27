"""How the command line spells the declared options (:mod:`rationale_cli.models.options`), which know
nothing of it: ``--name`` with dashes for underscores (``lam`` is ``--lambda``), and the
off-switch of each boolean option (``--no-NAME`` unless it reads better otherwise).

Low in the house so that the configuration's errors (:mod:`rationale_cli.runs.config`)
and the ``rationale`` command (``rationale_cli.cli``) name options the same way.
"""

from __future__ import annotations

from rationale_cli.models.options import OptionError

# names that read better otherwise on a command line
SPELLED = {"lam": "lambda"}
# the off-switch of a boolean option, where it is not --no-NAME
NEGATIVES = {
    "fix_embeddings": "--train-embeddings",
    "straight_through": "--relaxed",
    "dependent": "--independent",
    "lagrangian": "--fixed-penalty",
    "exact_penalty": "--sampled-penalty",
}


def flag_of(name: str) -> str:
    """The flag of option ``name``: ``batch_size`` -> ``--batch-size``, ``lam`` -> ``--lambda``."""
    return "--" + SPELLED.get(name, name).replace("_", "-")


def negative_of(name: str) -> str:
    """The flag that turns boolean option ``name`` off: ``--no-pairwise``, ``--independent``."""
    return NEGATIVES.get(name, "--no-" + flag_of(name)[2:])


def option_line(err: OptionError) -> str:
    """An :class:`~rationale_cli.models.options.OptionError` as a user reads it, with options as flags
    (those that what it allows names too)."""
    return err.describe(flag_of)
