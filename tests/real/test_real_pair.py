"""Integration on the real built-in pair (Qwen2.5-Coder 1.5B target, 0.5B int8 draft on CPU): it loads as prepared,
greedy output is exactly the target's, a sampled run is reproducible."""

import os

import pytest
import torch

from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end
from specviz.models import builtin
from specviz.runs import speculative_generate

pytestmark = pytest.mark.real


def test_builtin_pair_loads_shares_vocab_and_predicts_code(builtin_pair):
    """builtin_pair (conftest) skips only when the cache is absent, and fails then under SPECVIZ_REQUIRE_BUILTIN=1."""
    from transformers import AutoTokenizer

    pair = builtin_pair
    assert pair.names["target"].startswith("Qwen2.5-Coder-1.5B")
    assert pair.names["draft"].startswith("Qwen2.5-Coder-0.5B")
    if pair.device.type == "cpu":  # the default precision: bf16 where the CPU runs it natively, else int8
        from specviz.models.fastpath import native_bfloat16

        precision = os.environ.get("SPECVIZ_TEST_PRECISION", "bf16" if native_bfloat16(pair.device) else "int8")
        assert (pair.names["device"], pair.names["precision"], pair.names["draft_quantized"]) == (
            "cpu",
            precision,
            "int8",
        )
    draft_tokenizer = AutoTokenizer.from_pretrained(builtin.converted_dir(builtin.DRAFT))
    assert draft_tokenizer.get_vocab() == pair.tokenizer.get_vocab()
    assert {151645, 151643} <= pair.eos_ids

    ids = torch.tensor([pair.tokenizer("def fibonacci(n):")["input_ids"]], device=pair.device)
    with torch.inference_mode():
        p = pair.target(ids).logits[0, -1].float().softmax(-1)
        q = pair.draft(ids).logits[0, -1].float().softmax(-1)
    p_top = p.argmax().item()
    assert pair.token_text(p_top) == "\n" and p[p_top] > 0.3  # the body starts on the next line
    assert q.argmax().item() in p.topk(5).indices.tolist()  # the draft approximates p
    assert pair.token_text(q.argmax().item()).strip() == ""  # (the int8 draft prefers " \n")


PROMPTS = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Translate to French: The weather is nice today and we are going to the beach.",
    "def quicksort(items):",
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_is_exactly_the_target(builtin_pair, prompt):
    """Speculative greedy text is the target's own (transformers' generate) on every prompt; the engine's plain
    decoding, the baseline the pages time, is checked against it on the first prompt (tests/real/test_traffic_real.py
    checks every drafter against that baseline on two more)."""
    pair = builtin_pair
    ids = pair.encode_prompt(prompt, chat=not prompt.startswith("def "))
    config = SpecConfig(gamma=5, max_new_tokens=32)
    rounds, spec = run_to_end(speculative_generate(pair, ids, config))
    with torch.inference_mode():
        reference = pair.target.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False)[0, len(ids) :]
    assert list(spec.token_ids) == reference.tolist()
    if prompt == PROMPTS[0]:
        _, base = run_to_end(autoregressive_generate(pair, ids, config))
        assert base.token_ids == spec.token_ids
    assert spec.accepted > 0  # the draft really helped: accepted tokens exist
    assert len(rounds) < spec.new_tokens
    assert spec.text.strip()  # and the text is real text


def test_sampling_run_is_reproducible_and_well_formed(builtin_pair):
    pair = builtin_pair
    ids = pair.encode_prompt("Write a haiku about the sea.")
    config = SpecConfig(gamma=4, temperature=0.8, top_p=0.95, max_new_tokens=16, seed=7)
    rounds_a, a = run_to_end(speculative_generate(pair, ids, config))
    _, b = run_to_end(speculative_generate(pair, ids, config))
    assert a.token_ids == b.token_ids  # a torch.Generator per run: same seed, same text
    for r in rounds_a:
        for d in r.drafted:
            assert 0.0 <= d.p <= 1.0 and 0.0 < d.q <= 1.0
        if r.rejection_index is not None:
            assert r.top_residual and abs(sum(t.prob for t in r.top_residual)) <= 1.0 + 1e-5
