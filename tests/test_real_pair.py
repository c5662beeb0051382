"""Integration on the real built-in pair (Qwen2.5-Coder 1.5B target, 0.5B int8 draft on CPU)."""

import pytest
import torch

from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end
from specviz.runs import speculative_generate

pytestmark = pytest.mark.real

PROMPTS = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Translate to French: The weather is nice today and we are going to the beach.",
    "def quicksort(items):",
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_is_exactly_the_target(builtin_pair, prompt):
    pair = builtin_pair
    ids = pair.encode_prompt(prompt, chat=not prompt.startswith("def "))
    config = SpecConfig(gamma=5, max_new_tokens=32)
    rounds, spec = run_to_end(speculative_generate(pair, ids, config))
    _, base = run_to_end(autoregressive_generate(pair, ids, config))
    with torch.inference_mode():
        reference = pair.target.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False)[0, len(ids) :]
    assert spec.token_ids == base.token_ids
    assert list(spec.token_ids) == reference.tolist()
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
