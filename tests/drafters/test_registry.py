"""The drafter registry: every drafter states its capabilities, label and description; the config's names are the
registry's; no module outside specviz/drafters/ spells a drafter's name; a new drafter is one class and one entry."""

import ast
from pathlib import Path

import pytest

from specviz import drafters
from specviz.decoding.config import ConfigError, SpecConfig, default_drafter, drafter_names
from specviz.decoding.proposal import Capabilities
from specviz.drafters.ngram import NgramDrafter

ROOT = Path(__file__).resolve().parents[2]
NAMES = tuple(drafters.REGISTRY)
CAPABILITIES = {
    name: hint for name, hint in Capabilities.__annotations__.items() if name not in ("name", "title")
}  # needs_draft_model, needs_hidden_states, point_mass, drafts_tree, keeps_cache, learns, sources
WORDS = ("title", "label", "description", "cache_note")  # what a person reads about a drafter
SHAPE = {  # what the trace check and the cache view read
    "draft_passes": ("per token", "one", "none"),
    "model_sources": tuple,
    "cache_lag": int,
    "leaves_beside_chain": bool,
    "reads_ngram_size": bool,
}


def test_the_config_accepts_exactly_the_registered_drafters():
    assert drafter_names() == NAMES and default_drafter() == drafters.DEFAULT == SpecConfig().drafter
    with pytest.raises(ConfigError, match="drafter must be one of"):
        SpecConfig(drafter="suffix").validate()
    with pytest.raises(drafters.DrafterError, match="no drafter named 'suffix'"):
        drafters.factory("suffix")


@pytest.mark.parametrize("name", NAMES)
def test_every_drafter_states_every_capability_and_follows_the_protocol(name):
    cls = drafters.drafter_class(name)
    assert cls.name == name and "{" not in cls.title.replace("{draft}", "")
    assert set(CAPABILITIES) == {"needs_draft_model", "needs_hidden_states", "point_mass", "drafts_tree"} | {
        "keeps_cache",
        "learns",
        "sources",
    }
    for capability in CAPABILITIES:
        value = getattr(cls, capability)
        assert isinstance(value, tuple if capability == "sources" else bool), (name, capability)
    for method in ("for_run", "prefill", "propose", "rollback", "learn"):
        assert callable(getattr(cls, method)), (name, method)
    assert drafters.factory(name).needs_hidden_states == cls.needs_hidden_states
    assert all(isinstance(getattr(cls, word), str) for word in WORDS) and cls.label and cls.description
    assert "\n" not in cls.description and not cls.description.endswith(".")  # one line; the help adds the stop
    assert bool(cls.cache_note) != cls.needs_draft_model  # the cache view draws a draft model's cache, else says why
    for attribute, shape in SHAPE.items():
        value = getattr(cls, attribute)
        assert value in shape if isinstance(shape, tuple) else isinstance(value, shape), (name, attribute)
    assert set(cls.model_sources) <= set(cls.sources)


def test_the_capabilities_say_what_each_drafter_is():
    assert drafters.with_capability("needs_draft_model") == ("model", "controller")
    assert drafters.with_capability("needs_hidden_states") == ("medusa", "eagle")
    assert drafters.with_capability("drafts_tree") == ("medusa", "eagle")
    assert drafters.with_capability("point_mass") == ("ngram", "traffic")
    assert drafters.with_capability("learns") == ("controller",)
    assert drafters.with_capability("sources") == ("traffic", "controller")
    assert drafters.standalone() == ("model", "ngram")
    assert drafters.model_drafted("controller", "both") and not drafters.model_drafted("controller", "traffic")
    assert drafters.model_drafted("model", "") and not drafters.model_drafted("eagle", "")


def spelled(source: str, names: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, name) of every string constant in `source` that is a drafter's name (an f-string's pieces too)."""
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    )


def _modules() -> list[Path]:
    """Every module of the app outside the registry's folder: the package, app.py and the pages."""
    package = sorted((ROOT / "specviz").rglob("*.py"))
    return [p for p in package if "drafters" not in p.relative_to(ROOT).parts] + [
        ROOT / "app.py",
        *sorted((ROOT / "pages").glob("*.py")),
    ]


def test_the_walk_finds_a_name_in_a_comparison_a_key_a_tuple_and_an_f_string():
    """The negative control of the next test: each way a name was spelled before issue 57 is found."""
    source = (
        'if config.drafter == "eagle":\n    x = {"model": 1}\nDRAFTERS = ("ngram", "other")\n'
        "y = f\"{s['traffic']}\"\nz = 'a model and a controller'\n"
    )
    assert spelled(source, NAMES) == [(1, "eagle"), (2, "model"), (3, "ngram"), (4, "traffic")]


def test_no_module_outside_the_registry_spells_a_drafters_name():
    """Names, labels and captions come from the registry's classes (docs/DESIGN.md, "The drafter protocol and the
    registry"): a module that spells a name as a string breaks when a drafter is renamed or added."""
    found = {}
    for path in _modules():
        where = path.relative_to(ROOT).as_posix()
        hits = spelled(path.read_text(encoding="utf-8"), NAMES)
        if hits:
            found[where] = hits
    assert not found, f"drafters' names spelled outside specviz/drafters/: {found}"


class EchoDrafter(NgramDrafter):
    """A drafter added as DESIGN says: its class, with its attributes and for_run, and one registry entry."""

    name = "echo"
    title = label = "echo lookup"
    description = "copies the prompt's last match, for the registry's test"


@pytest.fixture
def echo(monkeypatch):
    monkeypatch.setitem(drafters.REGISTRY, EchoDrafter.name, EchoDrafter)
    return EchoDrafter


def test_a_new_drafter_is_one_class_and_one_registry_entry(echo):
    from specviz.cli.args import OneLineParser, add_config_arguments, config_from

    parser = OneLineParser(prog="specviz generate")
    add_config_arguments(parser)
    choices = next(a for a in parser._actions if a.dest == "drafter")
    assert echo.name in choices.choices and echo.description in choices.help
    assert config_from(parser.parse_args(["--drafter", echo.name])).drafter == echo.name
    assert SpecConfig(drafter=echo.name).validate().drafter == echo.name
    assert drafters.factory(echo.name).kind is echo and echo.name in drafters.standalone()
    from specviz.bench.drafters import check_drafters

    assert check_drafters([echo.name], pair_has_draft=False) == [echo.name]


def _sidebar():
    from specviz.ui.settings import sidebar

    sidebar()


def test_the_sidebar_offers_a_new_drafter_by_its_label(echo, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("SPECVIZ_PAIR", "tiny")
    at = AppTest.from_function(_sidebar, default_timeout=60).run()
    radio = at.radio(key="cfg.drafter")
    assert radio.options == [drafters.label(n) for n in drafters.REGISTRY] and echo.label in radio.options
    radio.set_value(echo.name).run()
    assert not at.exception and at.session_state["state.shared"].settings.config.drafter == echo.name


@pytest.mark.parametrize("name", NAMES)
def test_the_cache_view_says_each_drafters_own_caption(name):
    """The cache view draws a draft model's cache for the drafters that drive one (the controller too) and says the
    others' own caption: a traffic run was told "the n-gram drafter has no model and no cache" before issue 57."""
    from specviz.markup import kv_cache_html
    from specviz.traces.trace import load_trace

    event = load_trace(ROOT / "assets" / "traces" / "1_code_greedy.json").rounds[1]
    html = kv_cache_html(event, 7, name)
    cls = drafters.drafter_class(name)
    assert ("Draft (q) cache" in html) == cls.needs_draft_model
    assert (cls.cache_note or "Draft (q) cache") in html.replace("&#x27;", "'")
    others = {c.cache_note for c in drafters.REGISTRY.values() if c.cache_note and c is not cls}
    assert not [note for note in others if note in html.replace("&#x27;", "'")], name
