"""A tree draft's candidates as a tree (draft heads with alternatives): every node with q, p and its verdict, the path
the target's walk kept in bold, the next token after its last node. Nodes are read tolerantly: one whose parent is
not a node before it is left out, and at most MAX_CHIPS are drawn."""

from __future__ import annotations

from specviz.traces.trace import RoundEvent

from .base import MAX_CHIPS, VERDICT_CLASS, count, css_class, esc, fmt_prob, visible

MARKS = {"accepted": "✓", "rejected": "✗", "unchecked": "·"}


def _children(event: RoundEvent) -> dict[int, list[int]]:
    """Node -> its children in the walk's order (chain child first); tree nodes with a bad parent are dropped."""
    n = len(event.drafted)
    kids: dict[int, list[int]] = {node: [node + 1] for node in range(-1, n - 1)}
    drawn = set(range(-1, n))
    for j, node in enumerate(event.tree[:MAX_CHIPS]):
        parent = getattr(node, "parent", None)
        if type(parent) is int and parent in drawn:  # a node before this one, itself drawn
            kids.setdefault(parent, []).append(n + j)
            drawn.add(n + j)
    return kids


def _label(token, name: str, greedy: bool) -> str:
    verdict = css_class(getattr(token, "verdict", None), VERDICT_CLASS, "unchecked")
    numbers = f"q {fmt_prob(token.q)} · p {fmt_prob(token.p)}"
    if not greedy and getattr(token, "u", None) is not None:
        numbers += f" · u {fmt_prob(token.u)}"
    return (
        f'<span class="sv-node sv-{verdict}"><span class="sv-node-name">{esc(name)}</span> '
        f'<span class="sv-tok">{esc(visible(token.text))}</span> {MARKS[verdict]} '
        f'<span class="sv-node-nums">{esc(numbers)}</span></span>'
    )


def tree_html(event: RoundEvent, greedy: bool) -> str:
    """The round's token tree, or "" for a round without one."""
    if not event.tree or not event.drafted:
        return ""
    n, kids = len(event.drafted), _children(event)
    nodes = list(event.drafted) + list(event.tree)
    path_end = _path_end(event, kids)

    def branch(node: int) -> str:
        items = []
        for child in kids.get(node, []):
            name = f"d{child + 1}" if child < n else f"alt {child - n + 1}"
            inner = branch(child)
            if child == path_end:
                inner += _next_html(event)
            items.append(f"<li>{_label(nodes[child], name, greedy)}{inner}</li>")
        return f"<ul>{''.join(items)}</ul>" if items else ""

    root = '<span class="sv-node sv-root">newest committed token</span>'
    if path_end == -1:
        root += _next_html(event)
    more = len(event.tree) - MAX_CHIPS
    note = f'<div class="sv-more">… {esc(more)} more nodes not drawn</div>' if more > 0 else ""
    return (
        f'<div class="sv-tree"><div class="sv-tree-title">The candidate tree: {count(n)} drafted + '
        f"{count(len(event.tree))} off the chain, checked in one target forward</div>"
        f"<ul><li>{root}{branch(-1)}</li></ul>{note}</div>"
    )


def _path_end(event: RoundEvent, kids: dict[int, list[int]]) -> int:
    """The last node the walk kept (-1: the root), following the verdicts as the walk does."""
    nodes = list(event.drafted) + list(event.tree)
    node = -1
    while True:
        kept = next((c for c in kids.get(node, []) if getattr(nodes[c], "verdict", None) == "accepted"), None)
        if kept is None:
            return node
        node = kept


def _next_html(event: RoundEvent) -> str:
    source = "bonus" if event.next_source == "bonus" else "resampled"
    what = "★ bonus" if source == "bonus" else "↻ correction"
    return (
        f'<ul><li><span class="sv-node sv-{source}"><span class="sv-node-name">next</span> '
        f'<span class="sv-tok">{esc(visible(event.next_token.text))}</span> {what}</span></li></ul>'
    )
