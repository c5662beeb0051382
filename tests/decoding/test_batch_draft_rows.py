"""The CPU's int8 draft in a batch (issue 45): torch's dynamic int8 takes one activation scale for the whole input, so
in a batched forward a row's draft logits depended on the other rows (and so its drafts and its acceptance on the
batch size). The batched path quantizes each token on its own (fastpath.per_token_activations): a row's draft logits
are the same bits alone and beside others, and a ragged batch keeps every row's own round lengths with an int8
draft too. Negative control: torch's own per-call scale, caught by both checks."""

import contextlib
import copy

import pytest
import torch

import specviz.decoding.batchcache as batchcache
from specviz.decoding.batchcache import BatchCache, left_padded
from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import vocab_width
from specviz.models.fastpath import per_token_activations, quantize_draft, quantize_linear
from specviz.models.tiny import tiny_pair
from specviz.runs import batch_speculative

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15, 16], [20], [30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41]]


@pytest.fixture(scope="module")
def int8_pair():
    pair = copy.copy(tiny_pair(seed=0, noise=0.02))
    pair.draft = quantize_draft(copy.deepcopy(pair.draft))
    return pair


@pytest.fixture
def per_call_scale(monkeypatch):
    """torch's own dynamic int8 in the batched path: one activation scale per forward over every row."""
    monkeypatch.setattr(batchcache, "per_token_activations", contextlib.nullcontext)


def test_a_layer_gives_each_row_the_same_bits_alone_and_together_only_per_token():
    layer = quantize_linear(torch.nn.Linear(64, 48))
    x = torch.randn(6, 64) * torch.linspace(0.1, 8.0, 6)[:, None]  # rows of very different ranges
    with torch.inference_mode():
        per_call = [torch.equal(layer(x[i : i + 1])[0], layer(x)[i]) for i in range(6)]
        with per_token_activations():
            per_token = [torch.equal(layer(x[i : i + 1])[0], layer(x)[i]) for i in range(6)]
            close = torch.allclose(layer(x), x @ layer.weight().dequantize().T + layer.float_bias, atol=0.05 * 8)
    assert all(per_token) and close
    assert not all(per_call)


def eager_per_token(layer, x: torch.Tensor) -> torch.Tensor:
    """The per-token path written out in eager ops: each row over its max |x|, the pin row, fbgemm's op, scaled back."""
    flat = x.reshape(-1, x.shape[-1])
    peak = flat.abs().amax(dim=1, keepdim=True).clamp_min(1e-12)
    pin = torch.zeros(1, flat.shape[1])
    pin[0, :2] = torch.tensor([1.0, -1.0])
    packed = layer._packed_params._packed_params
    out = torch.ops.quantized.linear_dynamic(torch.cat([flat / peak, pin]), packed, reduce_range=True)[:-1]
    bias = layer.float_bias
    out = out * peak if bias is None else torch.addcmul(bias, out - bias, peak)
    return out.reshape(*x.shape[:-1], -1)


def test_the_scripted_per_token_path_computes_the_eager_ops_bits_and_shares_only_the_same_input():
    torch.manual_seed(1)
    q, k = quantize_linear(torch.nn.Linear(64, 48)), quantize_linear(torch.nn.Linear(64, 16, bias=False))
    x, y = torch.randn(2, 3, 64) * 4, torch.randn(2, 3, 64)
    with torch.inference_mode():
        expected = [eager_per_token(q, x), eager_per_token(k, x), eager_per_token(q, y), eager_per_token(k, x)]
        with per_token_activations():  # as a decoder layer calls them: q and k read x, then other inputs come
            got = [q(x), k(x), q(y), k(x)]
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


def first_row_logits(pair, prompts: list[list[int]]) -> torch.Tensor:
    """Row 0's draft logits over three steps after its prompt, in a batch of these prompts."""
    _, pads = left_padded(prompts)
    state = BatchCache(pair.draft, vocab_width(pair), pads)
    ids, _ = left_padded(prompts)
    state.feed(ids, keep=1)
    return torch.stack([state.feed(torch.full((len(prompts), 1), t))[0, -1] for t in (3, 17, 40)])


def neighbours_effect(pair) -> float:
    """The largest change of row 0's draft logits when 1, 2 or 3 other prompts join its batch."""
    alone = first_row_logits(pair, PROMPTS[:1])
    return max((alone - first_row_logits(pair, PROMPTS[: b + 1])).abs().max().item() for b in (1, 2, 3))


def test_a_rows_int8_draft_logits_do_not_depend_on_its_neighbours(int8_pair):
    # what is left is float rounding in attention over a padded batch (the float draft's is ~3e-6 here)
    assert neighbours_effect(int8_pair) < 1e-5


def test_the_per_call_scale_is_caught(int8_pair, per_call_scale):
    assert neighbours_effect(int8_pair) > 1e-3


def round_lengths(pair) -> tuple[list[int], list[int]]:
    """(every (row, round)'s tokens in one batch of 4, the same prompts in two batches of 2), sorted. (Decoded one
    at a time they run on the engine's one-row cache, whose attention rounds differently: neighbours are the
    question here.)"""
    config = SpecConfig(gamma=4, max_new_tokens=20)
    apart = [n for two in (PROMPTS[:2], PROMPTS[2:]) for n in batch_speculative(pair, two, config).row_rounds]
    return sorted(batch_speculative(pair, PROMPTS, config).row_rounds), sorted(apart)


def test_an_int8_draft_keeps_each_rows_round_lengths_in_a_batch(int8_pair):
    together, alone = round_lengths(int8_pair)
    assert together == alone


def test_with_the_per_call_scale_the_round_lengths_move(int8_pair, per_call_scale):
    together, alone = round_lengths(int8_pair)
    assert together != alone
