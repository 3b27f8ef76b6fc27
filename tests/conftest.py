import os

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one thread per worker: the workers share the cores, and two threads each would contend
    torch.set_num_threads(1)


@pytest.fixture(params=["sequential", "tree"])
def method(request):
    """Both k-subset programs: the sequential one (CPUs) and the log-depth tree (GPUs)."""
    return request.param
