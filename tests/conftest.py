"""Fixtures shared by the test modules, the markers, and how the suite is spread over two workers.

The folders of tests/ mirror the package's (tests/decoding/ tests specviz/decoding/, ...); tests/ui/ holds the pages
through AppTest, tests/browser/ the walks in a real Chromium, tests/scripts/ the scripts' checks, and the tests on the
real built-in pair (marker `real`) live in tests/real/, and only there. Helpers that are plain functions live in
tests/helpers/ (a test module never imports another test module); fixtures shared by several modules live here.

scripts/run_tests.sh runs the suite on two pytest-xdist workers. Each test goes to whichever worker is free, except
the groups that `group_of` names, each of which runs in order on one worker: the real pair's tests (one worker loads
the pair, once: at about 17 GB at its peak two copies do not fit), the browser tests (one shared server), and each
module whose tests share an expensive module-scoped fixture (built once).
"""

import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
warnings.filterwarnings("ignore", category=FutureWarning)

REAL = "tests/real/"
ONE_WORKER = {  # test module: why its tests share one worker
    "test_browser.py": "browser",  # the tiny_app server, started once
    "test_narrow_window.py": "browser",
    "test_layout.py": "browser",
    "test_gpu_check.py": "the GPU rehearsal, run once for its three tests (70 s)",
    "test_structure.py": "every module imported alone in a fresh interpreter (16 s)",
    "test_batching_file.py": "a batching measurement on the tiny pair (10 s)",
    "test_batching_page.py": "a batching measurement on the tiny pair (7 s)",
    "test_bench.py": "a bench of the tiny pair",
    "test_recorded.py": "the recorded results read back",
    "test_learning_page.py": "a stream result on the tiny pair",
}
# The browser tests that only look at the shared tiny_app server run before those that run prompts on it (a run joins
# the server's traffic store, which the Learning page shows in a button's label).
LOOKS_FIRST = ("test_narrow_window.py",)


def group_of(nodeid: str) -> str:
    """The xdist work unit of a test: its group, or the test alone."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(REAL):
        return "builtin_pair"
    name = path.rsplit("/", 1)[-1]
    if name in ONE_WORKER:
        return "browser" if ONE_WORKER[name] == "browser" else path
    return nodeid


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist
def pytest_xdist_make_scheduler(config, log):
    """Load scheduling over the units of group_of, in collection order (the real pair's group first)."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)


# Tiny models run fastest on one thread, and so do the fixtures that build and run them: with more threads than the
# process has cores to itself (the other xdist worker, an app's background run), OpenMP's threads wait on each other
# and a tiny matrix product can take a scheduler time slice (about 4 ms) instead of microseconds.
CORES = torch.get_num_threads()  # torch's default: every core
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _threads(request):
    """Tests on the real pair (marker `real`) use every core, or this worker's share of them under pytest-xdist;
    everything else one thread."""
    share = max(1, CORES // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    torch.set_num_threads(share if request.node.get_closest_marker("real") else 1)
    yield
    torch.set_num_threads(1)


def pytest_configure(config):
    config.addinivalue_line("markers", "real: uses the built-in model pair (prepared by the README command)")
    config.addinivalue_line("markers", "browser: drives a real headless Chromium")


def _reorder(items: list, chosen: list, key) -> None:
    """Sort the chosen items among themselves by key (stable), in the places they already hold."""
    places = [i for i, item in enumerate(items) if item in chosen]
    for place, item in zip(places, sorted(chosen, key=key), strict=True):
        items[place] = item


def pytest_collection_modifyitems(config, items):
    real = []
    for item in items:
        marked, here = item.get_closest_marker("real") is not None, item.nodeid.startswith(REAL)
        if "builtin_pair" in item.fixturenames and not marked or marked != here:
            raise pytest.UsageError(f"{item.nodeid}: a test on the built-in pair is marked real and lives in {REAL}")
        if marked:
            real.append(item)
    # A test that starts its own copy of the pair (a server) runs before this process loads one (builtin_pair).
    _reorder(items, real, key=lambda item: "builtin_pair" in item.fixturenames)
    items[:] = real + [item for item in items if item not in real]  # the longest group first
    tiny_app = [item for item in items if "tiny_app" in item.fixturenames]
    _reorder(items, tiny_app, key=lambda item: item.path.name not in LOOKS_FIRST)


@pytest.fixture(scope="module")
def pair():
    """The tiny random pair (specviz.models.tiny), built once per module; a module that needs another one (a smaller
    vocabulary, a noisier draft) defines its own `pair`."""
    from specviz.models.tiny import tiny_pair

    return tiny_pair()


@pytest.fixture(scope="session")
def builtin_pair():
    """The real built-in pair, loaded once, in the default precision (SPECVIZ_TEST_PRECISION=fp32|bf16|int8 picks
    another: the exactness tests by hand in each). scripts/run_tests.sh prepares it and sets
    SPECVIZ_REQUIRE_BUILTIN=1, so there a missing pair fails instead of skipping."""
    from specviz.models.builtin import builtin_ready
    from specviz.models.loading import PairSpec, load_pair

    precision = os.environ.get("SPECVIZ_TEST_PRECISION", "auto")
    if precision == "auto" and not builtin_ready():
        if os.environ.get("SPECVIZ_REQUIRE_BUILTIN") == "1":
            pytest.fail("the built-in pair is not prepared: run python -m specviz prepare")
        pytest.skip("the built-in pair is not prepared (python -m specviz prepare)")
    return load_pair(PairSpec(precision=precision))


@pytest.fixture
def app(monkeypatch, tmp_path):
    """The app through AppTest on the tiny pair, with no recorded runs (an empty traces folder)."""
    from helpers.app import open_app

    return open_app(monkeypatch, tmp_path)


@pytest.fixture(scope="session")
def local_pair(tmp_path_factory) -> list[str]:
    """--target/--draft arguments for a tiny random pair saved as local model directories (read, never written)."""
    from specviz.models.tiny import save_tiny

    root = tmp_path_factory.mktemp("pair")
    letters = "abcdefghijklmnopqrstuvwxyz "
    target, draft = save_tiny(root / "target", letters, seed=0), save_tiny(root / "draft", letters, seed=1)
    return ["--target", str(target), "--draft", str(draft), "--device", "cpu"]


@pytest.fixture
def frozen_heap():
    """For a test that runs the bench: its gc.collect() before each measured run skips what was alive before the
    test (tests/helpers/heap.py)."""
    from helpers.heap import frozen_heap

    with frozen_heap():
        yield


@pytest.fixture(scope="session")
def tiny_app(tmp_path_factory):
    """`streamlit run app.py` on the tiny pair with the shipped recordings, one server for the browser tests that
    change nothing another one reads (each is its own browser session); yields its URL."""
    from helpers.browser import TINY, served

    with served(tmp_path_factory.mktemp("tiny_app"), TINY) as url:
        yield url
