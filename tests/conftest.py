import pytest


@pytest.fixture(params=["sequential", "tree"])
def method(request):
    """Both k-subset programs: the sequential one (CPUs) and the log-depth tree (GPUs)."""
    return request.param
