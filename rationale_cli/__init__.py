"""rationale-cli: train select-then-predict models and inspect their rationales.

The Python API (:mod:`rationale_cli.api`, imported on first use): ``train``, ``tune``, ``predict``,
``load``, ``Model``, ``Rationale``, ``Decoding``; the training loop itself is :func:`rationale_cli.training.loop.fit`.
"""

from rationale_cli.runtime.version import VERSION as __version__  # noqa: F401 - the package's version

API = ("train", "tune", "predict", "load", "Model", "Rationale", "Decoding")


def __getattr__(name: str):
    if name in API:
        from rationale_cli import api

        return getattr(api, name)
    raise AttributeError(f"module 'rationale_cli' has no attribute {name!r}")
