"""The Learning page's experiment on why a shared traffic store is a side channel (the words; lessons/experiments.py
lists it with the others): the same request run twice drafts the first answer back, as a stranger's run would on
a store shared by every visitor (docs/DESIGN.md, "A shared server")."""

from __future__ import annotations

QUESTION = (
    "Why is a traffic store private on a shared server? Run the same request twice (Try it, and once it has "
    "finished, Try it again) and compare the traffic drafter's two rows in the table."
)
OBSERVE = (
    "On the second run the traffic drafter's draft tokens accepted per round jump: its store holds your first "
    "answer, so it drafts that answer back and the target (greedy here) accepts it, several tokens a pass, and "
    "its speed-up rises with them (timings are noisier than the counts). Had a stranger run this request first "
    "on a shared store, your run would have drafted their answer, shown in your chips, and come back faster."
)
REASON = (
    "A traffic draft is a copy of earlier text, and this app shows every drafted token, accepted or rejected. "
    "With one store for everyone, typing the start of someone's request draws out how it went on, and a fast "
    "answer alone tells that someone asked the same. So on a server others can reach each tab drafts from its "
    "own requests, unless whoever starts the server shares the store."
)


def settings(request: str) -> tuple[tuple[str, object], ...]:
    """The Learning page's form only (never the sidebar): my request, this text."""
    return (("learning.what", "mine"), ("learning.request", request))
