"""Row-invariant attention (models/attention.py): a verify's logits equal single steps', bit for bit, in each CPU
precision, for a chain and for a token tree; today's sdpa, the negative control, does not."""

from __future__ import annotations

import contextlib

import pytest
import torch
from helpers.forms import save_form

from specviz.decoding.kvcache import CachedModel
from specviz.models.attention import is_row_invariant, make_row_invariant, standard_attention
from specviz.models.precision import PRECISIONS, load_streamed
from specviz.models.tiny import tiny_model, tiny_pair

VOCAB = 97
PREFIX = 11


@pytest.fixture(scope="module", params=["fp32", "bf16", "int8"])
def target(request, tmp_path_factory):
    """The tiny target as load_pair holds it in each precision: streamed, prepacked or int8, row-invariant."""
    name = request.param
    form = "float32" if name == "fp32" else "bfloat16"
    folder = save_form(tiny_model(VOCAB, seed=3, hidden=128, layers=2), tmp_path_factory.mktemp(name) / form, form)
    return make_row_invariant(load_streamed(folder, PRECISIONS[name], draft=False, quantize=False))


def single_steps(model, prefix: list[int], tokens: list[int]) -> torch.Tensor:
    """The logits after each of `tokens`, fed one at a time after `prefix` (plain decoding)."""
    cached = CachedModel(model, VOCAB)
    cached.feed(prefix)
    return torch.stack([cached.feed([token])[0] for token in tokens])


def chain_verify(model, prefix: list[int], tokens: list[int]) -> torch.Tensor:
    cached = CachedModel(model, VOCAB)
    cached.feed(prefix)
    return cached.feed(tokens, logits_to_keep=len(tokens))


def ids(count: int, seed: int) -> list[int]:
    return torch.randint(1, VOCAB, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("rows", [1, 2, 5, 9])
def test_a_verify_gives_each_row_the_bits_of_a_single_step(target, rows):
    prefix, tokens = ids(PREFIX, 0), ids(rows, 1)
    assert torch.equal(chain_verify(target, prefix, tokens), single_steps(target, prefix, tokens))


def test_negative_control_transformers_sdpa_does_not(target):
    """The same check with today's attention fails in every precision (a multi-row verify sums in another order)."""
    prefix, tokens = ids(PREFIX, 0), ids(9, 1)
    with standard_attention():
        assert not torch.equal(chain_verify(target, prefix, tokens), single_steps(target, prefix, tokens))


@pytest.mark.parametrize("control", [False, True])
def test_a_tree_nodes_row_is_the_single_step_after_its_path(target, control):
    """feed_tree's custom mask: each node sees the cache, its ancestors and itself, gathered in order, so its row is
    what plain decoding gives once that path is committed (the negative control: sdpa with the mask is not)."""
    prefix, chain = ids(PREFIX, 2), ids(4, 3)
    nodes = [(5, 1), (7, 1), (9, 4), (11, 2)]  # (token, parent): parents index chain + nodes
    with standard_attention() if control else contextlib.nullcontext():
        cached = CachedModel(target, VOCAB)
        cached.feed(prefix)
        rows = cached.feed_tree(chain, nodes, chain_rows=len(chain))
        fed = chain + [token for token, _ in nodes]
        parents = list(range(-1, len(chain) - 1)) + [parent for _, parent in nodes]
        same = [torch.equal(rows[: len(chain)], single_steps(target, prefix, chain))]
        for j in range(len(chain), len(fed)):
            path, at = [], j
            while at >= 0:
                path.insert(0, fed[at])
                at = parents[at]
            same.append(torch.equal(rows[j], single_steps(target, prefix, path)[-1]))
    assert all(same) != control


def test_load_pairs_targets_are_row_invariant_and_their_drafts_are_not():
    pair = tiny_pair()
    assert is_row_invariant(pair.target) and not is_row_invariant(pair.draft)


def test_load_pair_makes_the_target_row_invariant_and_says_so(tmp_path):
    from specviz.models.loading import PairSpec, load_pair
    from specviz.models.tiny import char_tokenizer

    tokenizer = char_tokenizer()
    for name, seed in (("t", 0), ("d", 1)):
        tiny_model(len(tokenizer) + 8, seed=seed, hidden=64, layers=2).save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    pair = load_pair(PairSpec(target=str(tmp_path / "t"), draft=str(tmp_path / "d"), device="cpu", precision="fp32"))
    assert is_row_invariant(pair.target) and not is_row_invariant(pair.draft)
    assert pair.names["attention"] == "row-invariant"


def test_the_identity_words_follow_the_runs_attention():
    """A run with row-invariant attention is promised identical greedy text (a difference is a fault); a recording
    made without it is told as one that could flip a near-tie."""
    from specviz.markup import identity_broken, precision_note

    live = {"precision": "bf16", "attention": "row-invariant"}
    old = {"precision": "bf16"}
    assert "identical in every precision" in precision_note(live) and "tied" not in precision_note(live)
    assert "tied within rounding" in precision_note(old)
    assert "fault" in identity_broken(live) and "near-tie" in identity_broken(old)


@pytest.mark.parametrize("control", [False, True])
def test_a_prompt_fused_into_the_first_verify_gives_the_prompt_pass_and_single_steps_bits(target, control):
    """SpecConfig.fuse_prompt (the bench's default): the first round feeds the prompt and the drafts in one forward
    on an empty cache. Its prompt rows must be plain decoding's prompt pass and its draft rows single steps; the
    negative control computes all of them as one prompt pass (no committed count)."""
    prompt, drafts = ids(PREFIX, 4), ids(5, 5)
    plain = CachedModel(target, VOCAB)
    first = plain.feed(prompt)  # plain decoding's fused first step: the whole prompt, the next token's logits
    steps = torch.cat([first, torch.stack([plain.feed([token])[0] for token in drafts])])
    fused = CachedModel(target, VOCAB)
    rows = fused.feed(prompt + drafts, logits_to_keep=len(drafts) + 1, committed=None if control else len(prompt))
    assert torch.equal(rows, steps) != control


@pytest.mark.parametrize("rows", [33, 64, 96])
def test_a_verify_wider_than_the_bfloat16_kernels_block_still_gives_single_steps_bits(target, rows):
    """oneDNN's prepacked bfloat16 kernel blocks 33 rows and more differently (models/rows.py): a feed multiplies
    its drafts in pieces of at most 32 rows, so a tree verify of any width keeps single steps' bits."""
    prefix, tokens = ids(PREFIX, 6), ids(rows, 7)
    assert torch.equal(chain_verify(target, prefix, tokens), single_steps(target, prefix, tokens))


def test_negative_control_without_the_pieces_a_wide_bfloat16_verify_differs():
    """The kernel itself: 33 rows and more through a prepacked bfloat16 layer at once give some row other bits than
    alone (two threads, this project's Xeon); in a feed's pieces they do not. Where a CPU's kernel keeps every row's
    bits anyway, the control has nothing to show and says so."""
    from specviz.models.fastpath import PrepackedLinear, prepack_available
    from specviz.models.rows import invariant_feed

    if not prepack_available():
        pytest.skip("oneDNN's prepacked kernels are not in this torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the suite's workers run on one thread each; the kernel splits its rows on two
    try:
        torch.manual_seed(0)
        layer = PrepackedLinear(torch.nn.Linear(1536, 256).to(torch.bfloat16), batch_hint=8, min_rows=4)
        x = torch.randn(96, 1536).to(torch.bfloat16)
        with torch.inference_mode():
            alone = torch.cat([layer(x[i : i + 1]) for i in range(96)])
            at_once = torch.equal(layer(x), alone)  # outside a feed: one call, the kernel's own blocking
            with invariant_feed(0):
                in_pieces = torch.equal(layer(x), alone)
    finally:
        torch.set_num_threads(threads)
    assert in_pieces
    if at_once:
        pytest.skip("this CPU's bfloat16 kernel gives 96 rows the bits of one: the control cannot show a difference")
