"""Token trees for the draft heads (specviz/decoding/tree.py): the tree forward's rows and states, the shape, the walk's
decisions, exactness and losslessness of Medusa's and EAGLE's trees (with a broken walk caught), the trace checks
and the view."""

import dataclasses
import json

import pytest
import torch
from helpers.heads import random_head, random_heads
from helpers.lossless import RUNS, chi_square_pair, chi_square_rejects, detected, empirical_joint, exact_joint, outcomes

import specviz.decoding.tree as tree_module
from specviz.decoding.config import GAMMA_LIMIT, MAX_TREE_NODES, SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end
from specviz.decoding.kvcache import CachedModel
from specviz.decoding.proposal import Draft, TreeNode
from specviz.decoding.tree import build_tree, depths, tree_nodes, tree_shape, verify_tree
from specviz.drafters.heads import forget_heads, use_heads
from specviz.lessons.lab import round_origins
from specviz.markup import explain_round, tree_html
from specviz.models.tiny import tiny_pair
from specviz.runs import speculative_generate
from specviz.traces.trace import Trace, TraceError, trace_from_json

PROMPT = "def add(a, b):\n    return a + b\n\ndef"


def _with_heads(pair, make):
    """The pair with heads made for it registered, until the fixture ends."""
    use_heads(pair.target, make(pair))
    yield pair
    forget_heads(pair.target)


def _every(step: int):
    return lambda pair: list(range(0, pair.target.config.vocab_size, step))


@pytest.fixture(scope="module")
def medusa_pair():
    yield from _with_heads(tiny_pair(seed=3), lambda pair: random_heads(pair, count=4, keep=_every(2)(pair)))


@pytest.fixture(scope="module")
def eagle_pair():
    yield from _with_heads(tiny_pair(seed=11), lambda pair: random_head(pair, keep=_every(3)(pair)))


@pytest.fixture(scope="module")
def small_medusa():  # a vocabulary of 6, id 2 outside the heads' (q = 0 there)
    yield from _with_heads(chi_square_pair(), lambda p: random_heads(p, 3, keep=[0, 1, 3, 4, 5]))


@pytest.fixture(scope="module")
def small_eagle():
    yield from _with_heads(chi_square_pair(), lambda p: random_head(p, keep=[0, 1, 2, 4, 5]))


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@torch.inference_mode()
def test_tree_forward_gives_each_node_the_rows_and_state_of_its_own_path(medusa_pair, attention):
    model = medusa_pair.target
    saved = model.config._attn_implementation
    model.config._attn_implementation = attention
    try:
        width = model.config.vocab_size
        context, chain = [3, 14, 15, 9, 2, 6], [5, 6, 7]
        nodes = [(8, 0), (9, 3), (10, 1), (11, 4)]  # beside chain[1]; after it; beside chain[2]; two off-chain deep
        tree = CachedModel(model, width, keep_hidden=True)
        tree.feed(context)
        rows = tree.feed_tree(chain, nodes, chain_rows=3)
        assert tree.ids == context + chain and tree.cache.get_seq_length() == len(context + chain)  # nodes cropped
        paths = [chain[:1] + [8], chain[:1] + [8, 9], chain[:2] + [10], chain[:1] + [8, 9, 11]]
        for i, path in enumerate(paths):
            alone = CachedModel(model, width, keep_hidden=True)
            alone.feed(context)
            torch.testing.assert_close(rows[3 + i], alone.feed(path)[0], atol=1e-4, rtol=1e-4)
            committed = context + path
            expected = alone.state_at(committed, len(committed) - 1)
            torch.testing.assert_close(tree.state_at(committed, len(committed) - 1), expected, atol=1e-4, rtol=1e-4)
        # The same token at the same position after another parent is another state: found by its path.
        assert tree.state_at(context + chain[:1] + [6, 9], len(context) + 2) is None
        plain = CachedModel(model, width)
        plain.feed(context + chain)
        torch.testing.assert_close(tree.feed([11]), plain.feed([11]), atol=1e-4, rtol=1e-4)
    finally:
        model.config._attn_implementation = saved


def test_a_node_whose_parent_comes_after_it_is_refused(medusa_pair):
    state = CachedModel(medusa_pair.target, medusa_pair.target.config.vocab_size)
    state.feed([3, 4])
    with pytest.raises(ValueError, match="parent"):
        state.feed_tree([5, 6], [(7, 2)])


def test_the_shape_keeps_the_likeliest_paths_parents_first():
    ranked = torch.tensor([[0.5, 0.45], [0.9, 0.05]])
    # (1,): 0.45, then (1, 0): 0.45 * 0.9 beats (0, 1): 0.5 * 0.05 -- a child of an off-chain node
    assert tree_shape(ranked, 2, siblings_only=False) == [(1,), (1, 0)]
    assert tree_shape(ranked, 2, siblings_only=True) == [(1,), (0, 1)]  # EAGLE: beside the chain only
    assert tree_shape(ranked, 9, siblings_only=False) == [(1,), (0, 1), (1, 0), (1, 1)]
    assert tree_shape(torch.tensor([[1.0, 0.0]]), 3, siblings_only=False) == []  # q = 0: never a candidate
    nodes = tree_nodes([(1,), (0, 1), (1, 0)], [[10, 11], [20, 21]])
    assert nodes == (TreeNode(11, -1), TreeNode(21, 0), TreeNode(20, 2))
    assert depths(2, nodes) == [1, 2, 2]


def test_greedy_tree_ranks_are_q_s_next_best_and_sampled_ones_are_draws():
    q = torch.tensor([[0.1, 0.6, 0.3, 0.0], [0.5, 0.1, 0.1, 0.3]])
    nodes = build_tree(q, [1, 0], width=2, budget=2, siblings_only=False, greedy=True, generator=None)
    assert nodes == (TreeNode(2, -1), TreeNode(3, 0))  # (1,) 0.3; (0, 1) 0.6 * 0.3 = 0.18 beats (1, 0) 0.15
    generator = torch.Generator().manual_seed(0)
    sampled = build_tree(q, [2, 3], width=3, budget=4, siblings_only=True, greedy=False, generator=generator)
    assert [node.parent for node in sampled] == [-1, -1, 0, 0] and all(q[0, n.token] > 0 for n in sampled[:2])


def test_a_tree_never_holds_more_nodes_than_a_trace_may():
    q = torch.softmax(torch.randn(GAMMA_LIMIT, 50, generator=torch.Generator().manual_seed(1)), dim=-1)
    chain = q.argmax(dim=-1).tolist()
    nodes = build_tree(q, chain, width=9, budget=GAMMA_LIMIT * 8, siblings_only=True, greedy=True, generator=None)
    assert len(nodes) == MAX_TREE_NODES


def _draft(n_vocab: int, chain: list[int], tree: tuple[TreeNode, ...]) -> Draft:
    return Draft(chain, torch.full((len(chain), n_vocab), 1.0 / n_vocab), 1, tree=tree)


def _point_rows(tokens: list[int], n_vocab: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(tokens), n_vocab).float()


def test_the_greedy_walk_leaves_the_chain_and_follows_the_tree():
    # chain d1=1, d2=2; tree: 3 beside d1 (node 2), 4 after it (node 3). Rows: root, d1, d2, node 2, node 3.
    draft = _draft(6, [1, 2], (TreeNode(3, -1), TreeNode(4, 2)))
    decision = verify_tree(_point_rows([3, 0, 0, 4, 5], 6), draft, None, greedy=True)
    assert decision.kept == [3, 4] and decision.rejection_index == 0 and decision.tree_path == (0, 1)
    assert decision.next_token == 5 and decision.next_row == 4 and not decision.corrected  # a bonus after node 3
    corrected = verify_tree(_point_rows([3, 0, 0, 0, 5], 6), draft, None, greedy=True)
    assert corrected.kept == [3] and corrected.next_token == 0 and corrected.corrected and corrected.q_row == 1
    on_chain = verify_tree(_point_rows([1, 2, 5, 0, 0], 6), draft, None, greedy=True)
    assert on_chain.kept == [1, 2] and on_chain.rejection_index is None and on_chain.next_token == 5
    assert on_chain.tree_checks == {} and not on_chain.corrected


@pytest.mark.parametrize("drafter, printable", [("medusa", True), ("medusa", False), ("eagle", True), ("eagle", False)])
def test_greedy_tree_drafts_equal_the_target_and_the_strict_loader_takes_them(request, drafter, printable):
    """On a printable vocabulary and on one of 6 tokens, where random heads' other candidates are often right."""
    name = {"medusa": ("medusa_pair", "small_medusa"), "eagle": ("eagle_pair", "small_eagle")}[drafter][not printable]
    pair = request.getfixturevalue(name)
    prompt = pair.tokenizer(PROMPT)["input_ids"] if printable else [1, 2, 3, 1, 2, 3, 1, 2]
    config = SpecConfig(gamma=4, max_new_tokens=60, drafter=drafter, alternatives=2 if printable else 3)
    rounds, spec = run_to_end(speculative_generate(pair, prompt, config))
    _, base = run_to_end(autoregressive_generate(pair, prompt, config))
    assert spec.token_ids == base.token_ids
    assert sum(len(r.tree) for r in rounds) > 0
    assert printable or sum(len(r.tree_path) for r in rounds) > 0  # the walk did leave the chain
    assert all(len(r.tree) <= config.alternatives * len(r.drafted) and not r.alternatives for r in rounds)
    if drafter == "eagle":
        assert all(t.parent < len(r.drafted) for r in rounds for t in r.tree)  # leaves beside the chain
    else:
        assert any(t.parent >= len(r.drafted) for r in rounds for t in r.tree)  # children of off-chain nodes
    trace = Trace(config=config, pair={}, prompt=PROMPT, prompt_ids=tuple(prompt), rounds=tuple(rounds), summary=spec)
    again = trace_from_json(trace.to_json())
    assert again.rounds == trace.rounds


TREE_SAMPLING = SpecConfig(gamma=2, temperature=1.0, alternatives=2, max_new_tokens=3)


@pytest.mark.parametrize("drafter", ["medusa", "eagle"])
def test_sampled_trees_are_lossless(small_medusa, small_eagle, drafter):
    pair = small_medusa if drafter == "medusa" else small_eagle
    config = dataclasses.replace(TREE_SAMPLING, drafter=drafter)
    rounds, _ = run_to_end(speculative_generate(pair, [1, 2, 3, 1, 2, 3, 1, 2], config))
    assert any(r.tree for r in rounds)
    exact, counts = exact_joint(pair, config), empirical_joint(pair, config, RUNS)
    rejects, statistic, critical = chi_square_rejects(exact, counts, RUNS)
    assert not rejects, f"chi-square {statistic:.1f} > {critical:.1f}"


def test_a_walk_that_forgets_the_refused_candidates_is_detected(small_medusa, monkeypatch):
    """The bug: each sibling checked against p itself, and a correction drawn from p, as if nothing were refused."""
    monkeypatch.setattr(tree_module, "residual", lambda left, q: left)
    config = dataclasses.replace(TREE_SAMPLING, drafter="medusa")
    rejects, words = detected(exact_joint(small_medusa, config), outcomes(small_medusa, config))
    assert rejects, f"the broken walk passed: {words}"


@pytest.fixture(scope="module")
def recorded(medusa_pair):
    prompt = medusa_pair.tokenizer(PROMPT)["input_ids"]
    config = SpecConfig(gamma=4, max_new_tokens=60, drafter="medusa", alternatives=2)
    rounds, spec = run_to_end(speculative_generate(medusa_pair, prompt, config))
    trace = Trace(config=config, pair={}, prompt=PROMPT, prompt_ids=tuple(prompt), rounds=tuple(rounds), summary=spec)
    index = next(i for i, r in enumerate(rounds) if r.tree_path)
    return json.loads(trace.to_json()), index


def _refused(data: dict, match: str) -> None:
    with pytest.raises(TraceError, match=match):
        trace_from_json(json.dumps(data))


def test_the_loader_refuses_trees_that_no_walk_made(recorded):
    data, i = recorded
    tree = data["rounds"][i]["tree"]
    kept = next(j for j, t in enumerate(tree) if t["verdict"] == "accepted")
    broken = json.loads(json.dumps(data))
    broken["rounds"][i]["tree"][kept]["parent"] = len(data["rounds"][i]["drafted"]) + kept  # itself
    _refused(broken, "parent")
    broken = json.loads(json.dumps(data))
    unchecked = [j for j, t in enumerate(tree) if t["verdict"] == "unchecked"]
    broken["rounds"][i]["tree"][unchecked[0]]["verdict"] = "rejected"
    _refused(broken, "never got there|checked it")
    broken = json.loads(json.dumps(data))
    broken["rounds"][i]["tree"][kept]["verdict"] = "rejected"
    _refused(broken, "n_accepted|appended|checked it|never got there|next_source")
    broken = json.loads(json.dumps(data))
    broken["config"]["alternatives"] = 0
    _refused(broken, "tree")
    broken = json.loads(json.dumps(data))
    broken["rounds"][i]["tree"] = tree * 8  # more nodes than the settings allow
    _refused(broken, "tree")


def test_the_tree_view_draws_the_kept_path_and_escapes_every_value(recorded):
    data, i = recorded
    trace = trace_from_json(json.dumps(data))
    event = trace.rounds[i]
    html = tree_html(event, greedy=True)
    assert html.count("sv-node sv-accepted") == len([d for d in event.drafted if d.verdict == "accepted"]) + len(
        event.tree_path
    )
    assert "next" in html and "off the chain" in html and "kept" in explain_round(event, greedy=True)
    hostile = dataclasses.replace(
        event, tree=(dataclasses.replace(event.tree[0], text="<script>x</script>", parent=99),) + event.tree[1:]
    )
    drawn = tree_html(hostile, greedy=True)
    assert "<script>" not in drawn  # the bad parent's node is left out, and any text is escaped
    named = dataclasses.replace(event, tree=(dataclasses.replace(event.tree[0], text="<b>x</b>"),) + event.tree[1:])
    assert "&lt;b&gt;x&lt;/b&gt;" in tree_html(named, greedy=False)
    assert tree_html(dataclasses.replace(event, tree=()), greedy=True) == ""
    # The committed text's colours name the tree path's tokens, not the rejected drafts they replaced.
    origins = round_origins(event)
    expected = [d.text for d in event.drafted[: event.chain_accepted]] + [t.text for t in event.tree_path]
    assert [o.text for o in origins[: len(expected)]] == expected[: len(origins)]
