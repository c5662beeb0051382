"""Who decides what the server holds (issue 56), through AppTest on the tiny pair: on an exposed server its owner
(SPECVIZ_PAIRS, SPECVIZ_PRECISIONS) and no widget, forged or not; on a loopback server a sidebar choice replaces the
loaded pair, and another tab's sidebar does not. The registry itself: tests/serving/test_pair_cache.py."""

from __future__ import annotations

import weakref

import pytest
from helpers.app import APP, finish, settings_of, texts
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from specviz.models.loading import PairSpec
from specviz.serving.pairs import PAIRS
from specviz.ui.owner import PAIRS_ENV, PRECISIONS_ENV, owner_choice

AUTO, FP32, INT8 = "auto (fastest that fits)", "float32: exact weights", "int8: least memory"
BUILTIN_LABEL = "Built-in Qwen-Coder 1.5B ← 0.5B"


def held_keys() -> set:
    return {PAIRS.key(loader.spec, "tiny") for loader in PAIRS.held()}


def key(**kw) -> tuple:
    return PAIRS.key(PairSpec(**kw), "tiny")


@pytest.fixture
def listen(monkeypatch, tmp_path):
    """open(address): the app on the tiny pair as a server listening there would draw it, the registry empty."""
    before = st_config.get_option("server.address")
    for name in (PAIRS_ENV, PRECISIONS_ENV, "SPECVIZ_ALLOW_CUSTOM_MODELS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPECVIZ_PAIR", "tiny")
    monkeypatch.setenv("SPECVIZ_TRACES_DIR", str(tmp_path / "no-traces"))
    PAIRS.release_all()

    def open_app(address: str) -> AppTest:
        st_config.set_option("server.address", address)
        at = AppTest.from_file(APP, default_timeout=120).run()
        return loaded(at)

    yield open_app
    st_config.set_option("server.address", before)
    PAIRS.release_all()


def loaded(at: AppTest) -> AppTest:
    """Once every load under way has ended, the script run again."""
    for loader in PAIRS.held():
        assert loader.wait(60)
    at.run()
    assert not at.exception, at.exception
    return at


def options(at: AppTest, name: str) -> list[str]:
    return list(at.sidebar.selectbox(key=f"cfg.{name}").options)


def test_the_owners_names_are_read_strictly():
    presets = [("builtin", "builtin"), ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct")]
    default = owner_choice(presets, {})
    assert default.pairs == (("builtin", "builtin"),) and default.precisions == ("auto",) and not default.ignored
    chosen = owner_choice(presets, {PAIRS_ENV: "qwen/qwen2.5-7b-instruct, builtin,,x", PRECISIONS_ENV: "INT8 fp16"})
    assert chosen.pairs == tuple(reversed(presets)) and chosen.precisions == ("int8",)
    assert chosen.ignored == ((PAIRS_ENV, "x"), (PRECISIONS_ENV, "fp16"))
    assert owner_choice(presets, {PRECISIONS_ENV: "fp32 " * 100}).precisions == ("fp32",)


def test_an_exposed_server_holds_its_owners_pair_and_no_widget_changes_it(listen):
    at = listen("0.0.0.0")
    assert held_keys() == {key()}  # the default: the one default pair at the default precision
    assert options(at, "precision") == [AUTO] and options(at, "preset")[0] == BUILTIN_LABEL
    assert not [s for s in at.sidebar.selectbox if s.key in ("cfg.device", "cfg.quantize")]
    assert any("chosen by whoever started it" in c for c in texts(at.sidebar.caption))
    # values forged into the session for the boxes an exposed server does not draw: the server's own stand
    at.session_state["cfg.device"], at.session_state["cfg.quantize"] = "cpu", "off"
    loaded(at.run())
    assert settings_of(at).spec == PairSpec() and held_keys() == {key()}
    at.button(key="step.run").click().run()  # a run asks for the owner's pair, and gets it
    assert finish(at, "step").state == "done" and held_keys() == {key()}


def test_an_exposed_server_holds_every_pair_its_owner_named_and_a_visitor_picks_among_them(listen, monkeypatch):
    monkeypatch.setenv(PRECISIONS_ENV, "fp32,int8")
    monkeypatch.setenv(PAIRS_ENV, "builtin,nonsense")
    at = listen("0.0.0.0")
    both = {key(precision="fp32"), key(precision="int8")}
    assert held_keys() == both and options(at, "precision") == [FP32, INT8]
    first = {loader.spec: loader for loader in PAIRS.held()}
    for label in (INT8, FP32, INT8):
        loaded(at.sidebar.selectbox(key="cfg.precision").set_value(label).run())
        assert held_keys() == both and settings_of(at).spec.precision == {FP32: "fp32", INT8: "int8"}[label]
    assert {loader.spec: loader for loader in PAIRS.held()} == first  # the same loads: nothing loaded again
    assert any("`nonsense` in SPECVIZ_PAIRS" in w for w in texts(at.sidebar.warning)), texts(at.sidebar.warning)


def test_a_loopback_switch_replaces_the_pair_and_another_tab_does_not(listen):
    at = listen("localhost")
    assert held_keys() == {key()}
    old = weakref.ref(PAIRS.held()[0].pair)
    loaded(at.sidebar.selectbox(key="cfg.precision").set_value(FP32).run())
    assert held_keys() == {key(precision="fp32")} and old() is None  # let go: one pair held
    assert "Held in memory now: 1 pair (`builtin` at fp32)." in texts(at.sidebar.caption)
    other_tab = loaded(AppTest.from_file(APP, default_timeout=120).run())  # its sidebar says auto
    assert held_keys() == {key(precision="fp32")}
    assert any("chosen in another tab" in c for c in texts(other_tab.sidebar.caption))
    loaded(other_tab.button(key="cfg.switch").click().run())
    assert held_keys() == {key()}
