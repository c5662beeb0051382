"""A link is typed by anyone: whatever its query string, every page draws to its end (issue 56).

The pages run under AppTest on the tiny pair; one app serves every example (a page switch reruns the script with the
example's query string). `ui/links.py` is the one reader of st.query_params; a refused value leaves one note.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.app import APP
from hypothesis import example, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from specviz.lessons import experiments
from specviz.ui.links import MAX_DIGITS, parse_number

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(p.stem for p in (ROOT / "pages").glob("*.py"))
GUIDED = {Path(page.path).stem for page in experiments.PAGES if page.name}  # pages whose path links land on them
BROKEN = "Something went wrong on this page"
NOTE = re.compile(r"^The link's path=.* was ignored: .+\.$")

VALUES = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(categories=["Nd", "No"]), min_size=1, max_size=8),  # '²', '٣', '𝟗', ...
    st.integers(-20, 10**7).map(str),
    st.integers(MAX_DIGITS, 5_000).map(lambda n: "9" * n),
)
QUERIES = st.dictionaries(st.sampled_from(["path", "page", "x", "PATH"]), VALUES, max_size=3)


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECVIZ_PAIR", "tiny")
        patch.setenv("SPECVIZ_TRACES_DIR", str(tmp_path_factory.mktemp("no-traces")))
        at = AppTest.from_file(APP, default_timeout=120)
        at.run()
        assert not at.exception, at.exception
        yield at


def open_with(at: AppTest, page: str, query: dict[str, str]) -> AppTest:
    at.query_params.clear()
    at.query_params.update(query)
    at.switch_page(f"pages/{page}.py").run()
    return at


def drawn_to_its_end(at: AppTest, page: str) -> None:
    assert not at.exception, (page, at.exception)
    broken = [e.value for e in at.error if BROKEN in e.value or "This view failed" in e.value]
    assert not broken, (page, broken)
    assert at.expander or page not in GUIDED, page  # drawn past the guided experiments' expander


def notes(at: AppTest) -> list[str]:
    return [c.value for c in at.caption if c.value.startswith("The link's")]


@settings(max_examples=25, deadline=None)
@given(page=st.sampled_from(PAGES), query=QUERIES)
@example(page="step_through", query={"path": "\u00b2"})  # '²' passes str.isdigit
@example(page="race", query={"path": "5" * 5_000})  # int() refuses more than 4,300 digits
@example(page="theory", query={"path": "7" * 100_000})
@example(page="lossless", query={"path": "\u0663"})  # Arabic-Indic three
@example(page="heads", query={"path": "0"})
@example(page="batching", query={"path": "2", "path2": "x"})
@example(page="your_server", query={"path": "\u00b2"})  # a page without experiments: drawn, no note
def test_every_page_draws_to_its_end_whatever_the_link(shared_app, page, query):
    at = open_with(shared_app, page, query)
    drawn_to_its_end(at, page)
    number, _ = parse_number(query.get("path"), 1, len(experiments.PATH))
    if "path" in query and number is None and page in GUIDED:  # a page without experiments never reads path=
        assert len(notes(at)) == 1 and NOTE.match(notes(at)[0]), notes(at)
        assert len(notes(at)[0]) < 200  # one line, the value clipped
    else:
        assert notes(at) == []


def test_a_step_of_the_path_still_lands_on_its_experiment(shared_app):
    step = 1 + next(i for i, e in enumerate(experiments.PATH) if experiments.by_id(e).page == "theory")
    at = open_with(shared_app, "theory", {"path": str(step)})
    drawn_to_its_end(at, "theory")
    assert any(c.value.startswith(f"Step {step} of") for c in at.caption), [c.value for c in at.caption]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", 1), ("10", 10), ("007", 7), ("0", None), ("11", None), ("", None), (None, None), ("\u00b2", None),
     ("1\u00b2", None), (" 1", None), ("+1", None), ("-1", None), ("1e1", None), ("9" * 5_000, None),
     ("1" * (MAX_DIGITS + 1), None)],
)  # fmt: skip
def test_parse_number_takes_ascii_digits_in_range_only(text, expected):
    number, why = parse_number(text, 1, 10)
    assert number == expected
    assert (why == "") == (expected is not None)


def test_links_is_the_only_reader_of_the_query_string():
    readers = [
        str(path.relative_to(ROOT))
        for path in [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "specviz").rglob("*.py")]
        if re.search(r"query_params\s*[.\[]|query_params\s*\)|in\s+st\.query_params", path.read_text())
    ]
    assert readers == ["specviz/ui/links.py"], readers
