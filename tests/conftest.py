import os
from pathlib import Path

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one thread per worker: the workers share the cores, and two threads each would contend
    torch.set_num_threads(1)


def pytest_sessionstart(session):
    """The compiled loops built before any test (their one line "compiling ..." on standard
    error then comes here, not inside a command's output that a test reads)."""
    from rationale_cli.models import native

    for source in sorted(Path(native.__file__).parent.glob("*.c")):
        native.library(source.stem)


@pytest.fixture(params=["sequential", "tree"])
def method(request):
    """Both k-subset programs: the sequential one (CPUs) and the log-depth tree (GPUs)."""
    return request.param


def pytest_collection_modifyitems(config, items):
    """The slow tier's training runs first when both tiers run in one session (CI), so that the
    workers end together rather than one finishing a long run alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
