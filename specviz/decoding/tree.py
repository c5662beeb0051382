"""Token trees: a draft that hedges, with several candidates per position, all checked in one target forward.

A tree draft is the chain d_1..d_n (Draft.ids) plus off-chain nodes (Draft.tree). Nodes are numbered as the verify
feeds them: -1 is the root (the newest committed token), 0..n-1 the chain (node i is d_{i+1}, its parent i - 1),
n + j the draft's tree[j]; a parent always comes first. p's row node + 1 is the target's distribution after a node.
A node at depth k (the root's children have depth 1) is drawn from q_k, the draft's row k - 1: the heads' q does not
depend on the path above it (Medusa), or the node hangs off the chain, whose rows they are (EAGLE's siblings).

The verify walk (multi-candidate speculative sampling, as SpecInfer checks a tree): from the root, the children of the
current node are checked in order (the chain child first) by recursive rejection sampling against p after it; the
first kept child becomes the current node. With r_0 = p, child c_m is kept with probability min(1, r_{m-1}(c_m) /
q_k(c_m)), else r_m = norm(max(0, r_{m-1} - q_k)). When no child is kept the next token is drawn from what is left,
r_m (greedy: argmax p); when the current node has no children, it is a bonus token from p after it. Each step is
speculative sampling of what is left of p with proposal q_k, so every committed token follows p exactly, provided
the candidates at a node are independent draws from q_k and their number does not depend on their values.

Alternatives (a draft model's other candidates for its last token, when it was unsure of it) are the smallest such
tree: siblings of d_n, drawn from q_n, checked by the same walk only if d_n itself is rejected.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace

import torch

from .acceptance import Decision
from .config import MAX_TREE_NODES
from .proposal import Draft, TreeNode
from .sampling import acceptance_ratio, residual, sample

Ranks = tuple[int, ...]  # a path from the root: at depth k, the candidate of rank r_k (0: the chain's own d_k)


def tree_shape(ranked_q: torch.Tensor, budget: int, siblings_only: bool) -> list[Ranks]:
    """The off-chain paths worth checking: [n, width] q values of each depth's candidates, best first, give each path
    the score prod_k q_k(its rank-r_k candidate) (the draft's belief that the target takes it); the `budget` best
    are kept, a path only after its parent. siblings_only: a path leaves the chain at its last step only (a drafter
    whose q depends on the path above, EAGLE). Depends on q alone, never on which tokens a sampled draft drew."""
    n, width = ranked_q.shape
    values = ranked_q.tolist()
    frontier: list[tuple[float, Ranks]] = []

    def offer(path: Ranks, score: float) -> None:
        if score > 0:
            heapq.heappush(frontier, (-score, path))

    chain_score = 1.0  # the score of the chain's first `depth` tokens
    for depth in range(n):
        for rank in range(1, width):
            offer((0,) * depth + (rank,), chain_score * values[depth][rank])
        chain_score *= values[depth][0]
    kept: list[Ranks] = []
    while frontier and len(kept) < budget:
        negative, path = heapq.heappop(frontier)
        kept.append(path)
        if not siblings_only and len(path) < n:
            for rank in range(width):
                offer(path + (rank,), -negative * values[len(path)][rank])
    return sorted(kept, key=lambda path: (len(path), path))  # parents before children


def tree_nodes(paths: Sequence[Ranks], candidates: Sequence[Sequence[int]]) -> tuple[TreeNode, ...]:
    """Paths (parents first) -> nodes: candidates[k][r] is the token of rank r at depth k + 1."""
    n = len(candidates)
    index = {path: n + j for j, path in enumerate(paths)}
    nodes = []
    for path in paths:
        parent = path[:-1]
        on_chain = not any(parent)
        nodes.append(TreeNode(candidates[len(path) - 1][path[-1]], len(parent) - 1 if on_chain else index[parent]))
    return tuple(nodes)


def build_tree(
    q: torch.Tensor,
    chain: list[int],
    *,
    width: int,
    budget: int,
    siblings_only: bool,
    greedy: bool,
    generator: torch.Generator | None,
) -> tuple[TreeNode, ...]:
    """Off-chain nodes for the chain d_1..d_n drawn from q [n, V]: up to `budget` (and MAX_TREE_NODES), `width`
    candidates per position.

    Greedy: rank r at depth k is q_k's r-th most likely token (rank 0, its argmax, is d_k). Sampling: rank r >= 1 is
    the r-th independent draw from q_k (repeats allowed: a repeat of a refused token is refused again), d_k the 0th.
    """
    n = len(chain)
    if n == 0 or width < 2 or budget <= 0:
        return ()
    top = torch.topk(q, min(width, q.shape[-1]), dim=-1)
    paths = tree_shape(top.values, min(budget, MAX_TREE_NODES), siblings_only)
    if not paths:
        return ()
    if greedy:
        candidates = top.indices.tolist()
    else:
        draws = torch.multinomial(q, width - 1, replacement=True, generator=generator).tolist()
        candidates = [[d, *more] for d, more in zip(chain, draws, strict=True)]
    return tree_nodes(paths, candidates)


def draw_alternatives(
    q_last: torch.Tensor, chosen: int, count: int, generator: torch.Generator | None, greedy: bool
) -> list[int]:
    """Other candidates for the last drafted position, checked by the target only if the draft's own token fails.

    Greedy: q's next-best tokens after `chosen`. Sampling: `count` independent draws from q (repeats allowed;
    recursive rejection sampling needs i.i.d. candidates, and a repeat of a refused token is refused again).
    """
    if count <= 0:
        return []
    if greedy:
        ranked = torch.topk(q_last, min(count + 1, q_last.shape[-1])).indices.tolist()
        return [t for t in ranked if t != chosen and q_last[t] > 0][:count]
    return torch.multinomial(q_last, count, replacement=True, generator=generator).tolist()


def pick_alternatives(
    draft: Draft, *, count: int, confidence: float, generator: torch.Generator | None, greedy: bool
) -> list[int]:
    """Candidates besides the last drafted token d_n, when the draft was unsure of it (its top q below the
    confidence threshold; always without one): rejections happen mostly there, as the draft stops at its first
    unsure token. The target checks them in the same verify forward, where extra rows are nearly free (see
    docs/DESIGN.md, "Alternatives")."""
    if count <= 0 or not draft.ids or draft.q is None:
        return []
    q_last = draft.q[-1]
    if confidence > 0 and float(q_last.max()) >= confidence:
        return []
    return draw_alternatives(q_last, draft.ids[-1], count, generator, greedy)


def with_alternatives(draft: Draft, alternatives: Sequence[int]) -> Draft:
    """The draft as a token tree whose off-chain nodes are the alternatives: siblings of d_n (node n - 1), whose
    parent is node n - 2 (d_{n-1}, or the root when n = 1)."""
    if not alternatives:
        return draft
    return replace(draft, tree=tuple(TreeNode(token, len(draft.ids) - 2) for token in alternatives))


def children(n: int, tree: Sequence[TreeNode]) -> dict[int, list[int]]:
    """Each node's children in the order the walk checks them: its chain child first, then its tree nodes."""
    kids: dict[int, list[int]] = {node: [node + 1] for node in range(-1, n - 1)}
    for j, node in enumerate(tree):
        kids.setdefault(node.parent, []).append(n + j)
    return kids


def depths(n: int, tree: Sequence[TreeNode]) -> list[int]:
    """The depth of each tree node (the chain's d_i has depth i)."""
    found: list[int] = []
    for node in tree:
        found.append(node.parent + 2 if node.parent < n else found[node.parent - n] + 1)
    return found


def verify_tree(p: torch.Tensor, draft: Draft, generator: torch.Generator | None, greedy: bool) -> Decision:
    """The walk down a tree draft. p: [n + 1 + len(tree), V], row node + 1 after each node (root first)."""
    n, tree = len(draft.ids), draft.tree
    tokens = list(draft.ids) + [node.token for node in tree]
    kids, depth = children(n, tree), [*range(1, n + 1), *depths(n, tree)]
    checks: dict[int, tuple[float, float | None]] = {}  # node -> (ratio, u) as checked
    node, path = -1, []
    while node in kids:
        row, q_k = p[node + 1], draft.q[depth[node] if node >= 0 else 0]
        left = row  # r_0 = p: the first child is checked as a plain draft is
        for child in kids[node]:
            token = tokens[child]
            ratio = float(acceptance_ratio(left[token], q_k[token]))
            u = None if greedy else float(torch.rand(1, generator=generator, device=p.device))
            checks[child] = (ratio, u)
            if (token == int(row.argmax())) if greedy else u < ratio:
                node = child
                path.append(child)
                break
            left = residual(left, q_k)  # r_m = norm(max(0, r_{m-1} - q_k))
        else:  # none kept: the correction (greedy: the token the target alone would have produced)
            token = int(row.argmax()) if greedy else int(sample(left[None], generator, False)[0])
            prob = float(row[token] if greedy else left[token])
            return _decision(p, draft, path, checks, (token, prob, node), left, q_row=depth[node] if node >= 0 else 0)
    token = int(sample(p[node + 1 : node + 2], generator, greedy)[0])  # a leaf: the bonus token after it
    return _decision(p, draft, path, checks, (token, float(p[node + 1, token]), node), None, q_row=None)


def _decision(
    p: torch.Tensor,
    draft: Draft,
    path: list[int],
    checks: dict[int, tuple[float, float | None]],
    next_token: tuple[int, float, int],
    left: torch.Tensor | None,
    q_row: int | None,
) -> Decision:
    """The walk's outcome as a Decision: chain fields as for a plain draft, the tree's in tree_path / tree_checks.
    next_token: (token, its probability, the node it follows); left: the residual it was drawn from, if a correction;
    q_row: the row of q that residual was left by."""
    token, prob, last = next_token
    n = len(draft.ids)
    on_chain = [node for node in path if node < n]
    rejection = None if len(on_chain) == n else len(on_chain)
    chain = torch.arange(n, device=p.device)
    ids = torch.tensor(draft.ids, dtype=torch.long, device=p.device)
    ratios = acceptance_ratio(p[chain, ids], draft.q[chain, ids]).tolist()
    return Decision(
        kept=[draft.ids[node] if node < n else draft.tree[node - n].token for node in path],
        rejection_index=rejection,
        next_token=token,
        next_prob=prob,
        next_row=last + 1,
        u=[checks[i][1] for i in range(n) if i in checks],
        ratios=ratios,
        residual_row=left,
        tree_path=tuple(node - n for node in path if node >= n),
        tree_checks={node - n: check for node, check in checks.items() if node >= n},
        q_row=q_row,
    )
