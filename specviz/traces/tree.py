"""The agreements of a round's candidates off the chain in a trace file: alternatives at the last drafted position,
or a tree (draft heads with alternatives, decoding/tree.py), whose nodes' parents form a tree no deeper than the chain
and whose verdicts are those of the walk down it."""

from __future__ import annotations

from typing import Any

from specviz.decoding.config import MAX_TREE_NODES
from specviz.decoding.events import RoundEvent, TreeToken
from specviz.decoding.tree import children, depths
from specviz.drafters import drafter_class

from .refused import Refused, expect, show


def off_chain(r: RoundEvent, config: Any, where: str) -> tuple[list[int], bool]:
    """(the ids kept off the chain: a kept alternative or a tree path; whether the next token is a bonus)."""
    if r.tree:
        path, bonus = check_tree(r, config, where)
        return [t.id for t in path], bonus
    kept = _kept_alternative(r, config.alternatives, where)
    return ([kept.id] if kept else []), r.rejection_index is None or kept is not None


def _kept_alternative(r: RoundEvent, allowed: int, where: str) -> Any:
    """Alternatives are checked, in order, only when the last draft was rejected, until one is kept."""
    alternatives = r.alternatives
    expect(
        len(alternatives) <= allowed and (r.drafted or not alternatives),
        f"{where}.alternatives has {len(alternatives)}, for {len(r.drafted)} drafted and the settings' {allowed}",
    )
    verdicts = [a.verdict for a in alternatives]
    kept = verdicts.index("accepted") if "accepted" in verdicts else None
    last_rejected = r.drafted and r.rejection_index == len(r.drafted) - 1
    if not last_rejected:
        expected = ["unchecked"] * len(verdicts)
    elif kept is None:
        expected = ["rejected"] * len(verdicts)
    else:
        expected = ["rejected"] * kept + ["accepted"] + ["unchecked"] * (len(verdicts) - kept - 1)
    expect(verdicts == expected, f"{where}.alternatives: the verdicts are not in the order they are checked")
    return None if kept is None else alternatives[kept]


def check_tree(r: RoundEvent, config: Any, where: str) -> tuple[list[TreeToken], bool]:
    """(the off-chain nodes the walk kept, in order; whether the next token is a bonus) of a round with a tree."""
    n, tree, kind = len(r.drafted), r.tree, drafter_class(config.drafter)
    expect(
        kind.drafts_tree and config.alternatives > 0 and not r.alternatives,
        f"{where}.tree: only draft heads with alternatives on draft a tree, and then without separate alternatives",
    )
    most = min(n * config.alternatives, MAX_TREE_NODES)
    expect(len(tree) <= most, f"{where}.tree has {len(tree)} nodes; {n} drafted tokens allow {most}")
    for j, node in enumerate(tree):
        expect(-1 <= node.parent < n + j, f"{where}.tree[{j}].parent is {node.parent}: not a node before it")
        expect(
            not kind.leaves_beside_chain or node.parent < n,
            f"{where}.tree[{j}]: the {kind.title}'s tree has leaves beside its drafted tokens only",
        )
    for j, depth in enumerate(depths(n, tree)):  # the engine's own numbering, once every parent is known good
        expect(depth <= n, f"{where}.tree[{j}] lies deeper than the {n} drafted tokens")
    return _walk(r, children(n, tree), where)


def _walk(r: RoundEvent, kids: dict[int, list[int]], where: str) -> tuple[list[TreeToken], bool]:
    """Replay the walk on the recorded verdicts: at each node reached, its children are refused in order until one
    is kept (the walk goes on from it) or none is (a correction); a node without children ends it with a bonus.
    Every node the walk does not reach is unchecked."""
    n, tree = len(r.drafted), r.tree
    verdict = [d.verdict for d in r.drafted] + [t.verdict for t in tree]
    reached: set[int] = set()
    path: list[TreeToken] = []
    node = -1
    while node in kids:
        kept = None
        for child in kids[node]:
            reached.add(child)
            if verdict[child] == "accepted":
                kept = child
                break
            if verdict[child] != "rejected":
                raise Refused(f"{where}: node {child} is {show(verdict[child])}, yet the walk checked it")
        if kept is None:
            break
        if kept >= n:
            path.append(tree[kept - n])
        node = kept
    for j, token in enumerate(tree):
        if n + j not in reached:
            expect(token.verdict == "unchecked", f"{where}.tree[{j}] is {token.verdict}, but the walk never got there")
    return path, node not in kids
