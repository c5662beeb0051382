"""The drafter registry: every drafter states its capabilities, the config's names are the registry's, and the
engine is handed a factory, never a drafter's name."""

import ast
from pathlib import Path

import pytest

from specviz import drafters
from specviz.decoding.config import DRAFTERS, ConfigError, SpecConfig
from specviz.decoding.proposal import Drafter

CAPABILITIES = {
    name: hint for name, hint in Drafter.__annotations__.items() if name not in ("name", "title")
}  # needs_draft_model, needs_hidden_states, point_mass, drafts_tree, keeps_cache, learns, sources


def test_the_config_accepts_exactly_the_registered_drafters():
    assert tuple(drafters.REGISTRY) == DRAFTERS
    with pytest.raises(ConfigError, match="drafter must be one of"):
        SpecConfig(drafter="suffix").validate()
    with pytest.raises(drafters.DrafterError, match="no drafter named 'suffix'"):
        drafters.factory("suffix")


@pytest.mark.parametrize("name", DRAFTERS)
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


def test_the_capabilities_say_what_each_drafter_is():
    assert drafters.with_capability("needs_draft_model") == ("model", "controller")
    assert drafters.with_capability("needs_hidden_states") == ("medusa", "eagle")
    assert drafters.with_capability("drafts_tree") == ("medusa", "eagle")
    assert drafters.with_capability("point_mass") == ("ngram", "traffic")
    assert drafters.with_capability("learns") == ("controller",)
    assert drafters.with_capability("sources") == ("traffic", "controller")


def test_the_engine_names_no_drafter():
    """decoding/ knows the Drafter protocol only: no drafter's class, and no drafter's name as a string, appears in
    its code."""
    classes = {cls.__name__ for cls in drafters.REGISTRY.values()}
    for path in sorted((Path(drafters.__file__).parent.parent / "decoding").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in classes}
        # Literal[...] types state what a field may hold (the config's names, an event's draft source): not logic.
        typed = {id(c) for n in ast.walk(tree) if _is_literal(n) for c in ast.walk(n)}
        found |= {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in DRAFTERS and id(node) not in typed
        }
        if path.name == "config.py":
            found -= set(DRAFTERS)  # the config lists the names it accepts, and nothing else
        assert not found, f"{path.name} names {sorted(found)}"


def _is_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal"
