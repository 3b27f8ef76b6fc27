"""rationale-cli: train select-then-predict models and inspect their rationales.

The Python API (:mod:`rationale_cli.api`, imported on first use): ``train``, ``load``,
``Model``, ``Rationale``; the training loop itself is :func:`rationale_cli.training.loop.fit`.
"""

__version__ = "0.1.0"

API = ("train", "load", "Model", "Rationale")


def __getattr__(name: str):
    if name in API:
        from rationale_cli import api

        return getattr(api, name)
    raise AttributeError(f"module 'rationale_cli' has no attribute {name!r}")
