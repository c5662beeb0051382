import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
warnings.filterwarnings("ignore", category=FutureWarning)


@pytest.fixture(autouse=True)
def _threads(request):
    """Tiny models run fastest on one thread; tests on the real pair (marker `real`) use every core."""
    before = torch.get_num_threads()
    torch.set_num_threads(before if request.node.get_closest_marker("real") else 1)
    yield
    torch.set_num_threads(before)


def pytest_configure(config):
    config.addinivalue_line("markers", "real: uses the built-in model pair (prepared by the README command)")
    config.addinivalue_line("markers", "browser: drives a real headless Chromium")


@pytest.fixture(scope="session")
def builtin_pair():
    """The real built-in pair, loaded once. scripts/run_tests.sh prepares it and sets
    SPECVIZ_REQUIRE_BUILTIN=1, so there a missing pair fails instead of skipping."""
    from specviz.models.builtin import builtin_ready
    from specviz.models.loading import PairSpec, load_pair

    if not builtin_ready():
        if os.environ.get("SPECVIZ_REQUIRE_BUILTIN") == "1":
            pytest.fail("the built-in pair is not prepared: run python -m specviz prepare")
        pytest.skip("the built-in pair is not prepared (python -m specviz prepare)")
    return load_pair(PairSpec())
