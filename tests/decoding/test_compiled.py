"""Compiled decoding (static KV cache + torch.compile, CUDA graphs on a GPU), checked on the CPU.

torch.compile's "eager" backend traces the same graphs without generating code, so these tests are
fast; scripts/gpu_check.sh runs the real thing (inductor, CUDA graphs) on a GPU.
"""

import pytest
import torch

from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end
from specviz.decoding.kvcache import CachedModel, compiled_decoder, disable_compiled_decoding, enable_compiled_decoding
from specviz.models.tiny import tiny_model, tiny_pair
from specviz.runs import speculative_generate

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):"


@pytest.fixture(scope="module")
def plain():
    pair = tiny_pair()
    return pair, pair.encode_prompt(PROMPT, chat=False)


@pytest.fixture(scope="module")
def compiled():
    pair = tiny_pair()
    for model in (pair.target, pair.draft):
        enable_compiled_decoding(model, max_length=256, backend="eager")
    yield pair, pair.encode_prompt(PROMPT, chat=False)
    for model in (pair.target, pair.draft):
        disable_compiled_decoding(model)


# auto picks draft lengths from measured times, so only its greedy output is reproducible run to run.
@pytest.mark.parametrize(
    "schedule, temperature", [("constant", 0.0), ("constant", 1.0), ("adaptive", 0.0), ("adaptive", 1.0), ("auto", 0.0)]
)
def test_compiled_runs_equal_eager_runs(plain, compiled, schedule, temperature):
    config = SpecConfig(gamma=4, schedule=schedule, temperature=temperature, seed=2, max_new_tokens=40)
    (eager_pair, ids), (fast_pair, _) = plain, compiled
    for generate in (speculative_generate, autoregressive_generate):
        _, reference = run_to_end(generate(eager_pair, ids, config))
        _, fast = run_to_end(generate(fast_pair, ids, config))
        assert fast.token_ids == reference.token_ids


def test_compiled_steps_are_used_and_the_cache_is_static(compiled):
    pair, ids = compiled
    decoder = compiled_decoder(pair.target)
    before = decoder.steps
    _, base = run_to_end(autoregressive_generate(pair, ids, SpecConfig(max_new_tokens=10)))
    assert decoder.steps - before == 10  # every step after the prompt pass
    out = pair.target.generate(torch.tensor([ids]), max_new_tokens=10, do_sample=False, min_new_tokens=10)
    assert list(base.token_ids) == out[0, len(ids) :].tolist()
    state = CachedModel(pair.target, pair.target.config.vocab_size)
    assert type(state.cache).__name__ == "StaticCache"


def test_a_second_live_state_gets_its_own_dynamic_cache(compiled):
    pair, ids = compiled
    first = CachedModel(pair.target, pair.target.config.vocab_size)
    second = CachedModel(pair.target, pair.target.config.vocab_size)
    assert first.decoder is not None and second.decoder is None
    first.feed(ids[:5])
    second.feed(ids[:5])
    torch.testing.assert_close(first.feed([ids[5]]), second.feed([ids[5]]), atol=1e-4, rtol=1e-4)


def test_rollback_on_the_static_cache(compiled):
    pair, _ = compiled
    state = CachedModel(pair.target, pair.target.config.vocab_size)
    state.feed([5, 6, 7, 8, 9])
    state.rollback([5, 6, 7, 1, 2])
    assert state.ids == [5, 6, 7] and int(state.cache.get_seq_length()) == 3
    logits = state.feed([1, 2], logits_to_keep=2)
    with torch.inference_mode():
        fresh = pair.target(torch.tensor([[5, 6, 7, 1, 2]])).logits[0, -2:]
    torch.testing.assert_close(logits, fresh, atol=1e-4, rtol=1e-4)


def test_rollback_outside_inference_mode_when_the_length_counter_was_made_inside_it():
    """On CUDA the static cache's length counter is moved to the GPU during the first (inference-mode) forward, so it
    is an inference tensor, and a crop outside inference mode failed there (the first H100 run, 2026-12-06). On the
    CPU the move is a no-op; here the counter is remade in inference mode as CUDA makes it."""
    model = tiny_model(40, seed=4)
    enable_compiled_decoding(model, max_length=16, backend="eager")
    try:
        state = CachedModel(model, 40)
        state.feed([5, 6, 7, 8, 9])
        with torch.inference_mode():
            for layer in state.cache.layers:
                layer.cumulative_length = layer.cumulative_length.clone()
        assert torch.is_inference(state.cache.layers[0].cumulative_length)
        state.rollback([5, 6, 7, 1])
        assert state.ids == [5, 6, 7] and int(state.cache.get_seq_length()) == 3
    finally:
        disable_compiled_decoding(model)


def test_alternatives_are_left_out_on_a_compiled_target(compiled):
    # A static cache's compiled step takes no custom tree mask, so the token tree is not built there.
    pair, ids = compiled
    config = SpecConfig(gamma=2, alternatives=3, max_new_tokens=30)
    rounds, spec = run_to_end(speculative_generate(pair, ids, config))
    _, base = run_to_end(autoregressive_generate(pair, ids, config))
    assert spec.token_ids == base.token_ids
    assert not any(r.alternatives for r in rounds)


@torch.inference_mode()
def test_compiled_steps_fill_the_static_cache_exactly():
    """After the eager prompt pass, feeds of up to max_tokens tokens are compiled steps whose logits equal an eager
    cache's; longer feeds run eagerly; the static cache takes exactly max_length tokens and refuses one more."""
    model = tiny_model(40, seed=3)
    decoder = enable_compiled_decoding(model, max_length=8, backend="eager", max_tokens=2)
    try:
        fast, eager = CachedModel(model, 40), CachedModel(model, 40)  # the second gets a dynamic cache
        assert fast.decoder is decoder and eager.decoder is None
        for feed, steps in [([1, 2], 0), ([3, 4, 5], 0), ([6, 7], 1), ([8], 2)]:  # 8 tokens: full
            torch.testing.assert_close(fast.feed(feed), eager.feed(feed), atol=1e-4, rtol=1e-4)
            assert decoder.steps == steps, feed
        with pytest.raises(RuntimeError, match="holds 8 tokens"):
            fast.feed([9])
    finally:
        disable_compiled_decoding(model)
