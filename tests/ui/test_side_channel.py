"""Issue 44: the Learning page teaches why a shared traffic store is a side channel: its section says so, and its
experiment (the same request twice) shows what a stranger would see: the second run drafts the first one's answer
back, and more of it is accepted per round. AppTest on the tiny pair."""

from __future__ import annotations

from helpers.app import finish, go, open_app, state


def test_the_same_request_twice_drafts_the_first_answer_back(monkeypatch, tmp_path):
    # A private store, the case the section teaches. AppTest's server is loopback, where the store is shared by design
    # (one person's machine), so an earlier test's runs in this process would already be in it.
    monkeypatch.setenv("SPECVIZ_SHARED_TRAFFIC", "0")
    at = go(open_app(monkeypatch, tmp_path), "learning")
    words = "\n".join(m.value for m in at.markdown)
    assert "Why your traffic is yours" in words and "the speed alone tells that someone asked it before" in words
    assert "python -m" not in words.split("Why your traffic is yours")[1]  # no command line in the section
    for _ in range(2):
        at.button(key="learning.exp_learning_side_channel").click().run()
        finish(at, "learning")
    first, second = state(at, "learning").result
    assert first["request"] == second["request"]
    assert second["traffic"]["mean_accepted_per_round"] > first["traffic"]["mean_accepted_per_round"] + 1
    assert second["store"]["hit_rate"] > first["store"]["hit_rate"]
    answer = "\n".join(m.value for m in at.success)
    assert "On the second run the traffic drafter's draft tokens accepted per round jump" in answer
