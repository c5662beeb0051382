"""Issue 44: a batch's prefill keeps only the logits something reads (one column), not rows x tokens x vocabulary
(78 GB for 64 rows of 2,000 tokens on the built-in pair)."""

from specviz.bench.batching import prefilled
from specviz.decoding.engine import vocab_width
from specviz.models.tiny import tiny_pair


def test_the_prefill_asks_the_model_for_one_column_of_logits():
    pair = tiny_pair()
    asked = []
    forward = pair.target.forward

    def spy(*args, **kwargs):
        out = forward(*args, **kwargs)
        asked.append((kwargs.get("logits_to_keep"), tuple(out.logits.shape)))
        return out

    pair.target.forward = spy
    prompts = [[5, 6, 7, 8, 9] * 40, [9, 8, 7] * 30]
    state = prefilled(pair.target, prompts, vocab_width(pair))
    assert asked == [(1, (2, 1, vocab_width(pair)))]
    assert state.length == 200  # every prompt token is in the cache all the same
