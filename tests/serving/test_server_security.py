"""A browser user on a shared server (issue 14): what the sidebar lets a browser do is the server's choice,
and no prompt limit can be walked around. Through AppTest on the tiny pair; the server's address is
monkeypatched as streamlit's `server.address` option."""

from __future__ import annotations

import json
import os

import pytest
from helpers.app import APP, TINY_TRACE, finish, go, state, texts
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from specviz.ui.server import ALLOW_CUSTOM_ENV, is_loopback

CUSTOM = "Custom: hub ids or local paths"
SECRET = "/srv/specviz-secret-probe"


@pytest.fixture
def address(monkeypatch):
    """Set the address the server listens on for one test; streamlit's option is restored afterwards."""
    before = st_config.get_option("server.address")
    monkeypatch.delenv(ALLOW_CUSTOM_ENV, raising=False)
    monkeypatch.delenv("SPECVIZ_TRUST_REMOTE_CODE", raising=False)

    def set_to(value: str) -> None:
        st_config.set_option("server.address", value)

    yield set_to
    st_config.set_option("server.address", before)


def start(monkeypatch, tmp_path) -> AppTest:
    monkeypatch.setenv("SPECVIZ_PAIR", "tiny")
    monkeypatch.setenv("SPECVIZ_TRACES_DIR", str(tmp_path / "no-traces"))
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception
    return at


def sidebar_words(at: AppTest) -> str:
    return "\n".join(texts(at.sidebar.caption) + texts(at.sidebar.warning) + texts(at.sidebar.info))


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("", False),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("example.org", False),
        ("localhost.evil.org", False),
    ],
)
def test_loopback_addresses(host, loopback):
    assert is_loopback(host) is loopback


# --- remote code ----------------------------------------------------------------------------------


def test_no_widget_allows_remote_code(monkeypatch, tmp_path, address):
    at = start(monkeypatch, tmp_path)
    assert all(c.key != "cfg.trust" for c in at.checkbox)  # the box is gone
    assert not any("trust" in c.label.lower() for c in at.checkbox)
    words = sidebar_words(at)
    assert "Remote code: off" in words and "SPECVIZ_TRUST_REMOTE_CODE=1" in words
    at.session_state["cfg.trust"] = True  # a stale or forged value changes nothing
    at.run()
    assert at.session_state["state.shared"].settings.spec.trust_remote_code is False


def test_remote_code_only_from_the_server(monkeypatch, tmp_path, address):
    monkeypatch.setenv("SPECVIZ_TRUST_REMOTE_CODE", "1")
    at = start(monkeypatch, tmp_path)
    assert "Remote code: on" in sidebar_words(at)
    assert at.session_state["state.shared"].settings.spec.trust_remote_code is False  # the env var decides


# --- custom model pairs ---------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "::1"])
def test_custom_pairs_open_on_loopback(monkeypatch, tmp_path, address, host):
    address(host)
    at = start(monkeypatch, tmp_path)
    at.selectbox(key="cfg.preset").set_value(CUSTOM).run()
    assert at.text_input(key="cfg.custom_target") is not None
    assert "allowed, because this server listens on" in sidebar_words(at)


@pytest.mark.parametrize("host", ["0.0.0.0", "", "192.168.1.20"])
def test_custom_pairs_off_on_an_exposed_server(monkeypatch, tmp_path, address, host):
    """No text box, no loader, and no path typed earlier (or forged into the session) is ever looked at."""
    address(host)
    at = start(monkeypatch, tmp_path)
    at.session_state["cfg.custom_target"] = SECRET
    at.session_state["cfg.custom_applied"] = (SECRET, None)
    looked_at = []
    real_stat = os.stat

    def spying_stat(path, *args, **kwargs):
        if "specviz-secret-probe" in str(path):
            looked_at.append(path)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", spying_stat)
    at.selectbox(key="cfg.preset").set_value(CUSTOM).run()
    assert not at.exception
    assert not [w for w in at.text_input if w.key in ("cfg.custom_target", "cfg.custom_draft")]
    words = sidebar_words(at)
    assert "Custom model pairs are off on this server" in words and f"{ALLOW_CUSTOM_ENV}=1" in words
    settings = at.session_state["state.shared"].settings
    assert not settings.has_pair and settings.spec.target != SECRET
    at.button(key="step.run").click().run()  # a run cannot reach it either
    assert state(at, "step").job is None and any("Choose a model pair" in e for e in texts(at.main.error))
    from specviz.serving.pairs import PAIRS

    assert not any(key[0].target == SECRET for key in [*PAIRS._slots, *PAIRS._failed])
    assert looked_at == []


def test_custom_pairs_allowed_by_the_server_on_any_address(monkeypatch, tmp_path, address):
    address("0.0.0.0")
    monkeypatch.setenv(ALLOW_CUSTOM_ENV, "1")
    at = start(monkeypatch, tmp_path)
    at.selectbox(key="cfg.preset").set_value(CUSTOM).run()
    assert at.text_input(key="cfg.custom_target") is not None
    assert "allowed on this exposed server" in sidebar_words(at)


# --- limits that cannot be walked around ----------------------------------------------------------


@pytest.fixture
def app(monkeypatch, tmp_path):
    return start(monkeypatch, tmp_path)


@pytest.mark.parametrize(
    "prompt, answer, message",
    [
        ("Say something.", "x" * 8000, "the prompt and the answer so far are 8014 characters long; the limit is 8000"),
        ("y" * 1500, "x" * 1000, "tokens long; the limit is 2048"),  # the tiny pair: one token per character
    ],
)
def test_lossless_checks_the_answer_so_far_too(app, prompt, answer, message):
    go(app, "lossless")
    app.text_area(key="lossless.prompt").set_value(prompt).run()
    app.text_input(key="lossless.prefix").set_value(answer).run()
    app.button(key="lossless.run").click().run()
    assert not app.exception
    assert state(app, "lossless").job is None
    assert any(message in e and "Prompt and answer so far" in e for e in texts(app.error)), texts(app.error)


def test_lab_checks_every_prompt_before_it_starts(app):
    go(app, "acceptance_lab")
    app.multiselect(key="lab.categories").set_value(["code"])
    app.text_area(key="lab.own").set_value("A fine prompt.\n" + "z" * 8001).run()
    app.button(key="lab.run").click().run()
    assert not app.exception
    assert state(app, "lab").job is None  # nothing ran
    assert any("of the batch" in e and "the limit is 8000" in e for e in texts(app.error)), texts(app.error)


def test_lab_keeps_the_finished_runs_when_one_fails(app, monkeypatch):
    from specviz.lessons import lab

    real, calls = lab.run_trace, []

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom in run two")
        return real(*args, **kwargs)

    monkeypatch.setattr(lab, "run_trace", second_fails)
    go(app, "acceptance_lab")
    app.multiselect(key="lab.categories").set_value(["code", "repetition"])
    app.multiselect(key="lab.drafters").set_value(["ngram"])
    app.number_input(key="cfg.max_new_tokens").set_value(8).run()
    app.button(key="lab.run").click().run()
    job = finish(app, "lab")
    assert job.state == "done"
    runs = state(app, "lab").result
    assert len(runs) == 1 and runs[0].trace.summary.new_tokens == 8  # the run before the failure
    assert any("Run 2 of 2 failed" in e and "boom in run two" in e for e in texts(app.error)), texts(app.error)
    assert any(s.value == "1 run" for s in app.subheader)  # and it is shown, in the singular
    app.run()
    assert any("boom in run two" in e for e in texts(app.error))  # the error stays until the next run


def test_a_refused_file_cannot_write_markdown_into_its_error(app):
    """The loader's message quotes the file (an unknown field's name): it is shown as text, never as a link."""
    data = json.loads(TINY_TRACE.read_text())
    data["rounds"][0]["[evil](https://evil.example/f) <b>x</b>"] = 1
    app.get("file_uploader")[0].set_value(("evil.json", json.dumps(data).encode(), "application/json")).run()
    assert not app.exception
    errors = [e for e in texts(app.error) if "cannot be replayed" in e]
    assert errors and all("[evil](" not in e and "<b>" not in e for e in errors), errors
    assert all("\\[evil\\]" in e and "\\<b\\>" in e for e in errors), errors  # escaped: shown as typed
