"""CachedModel's own contract on a tiny random model: rollback, stand-in ids, kept hidden states, capacity."""

import torch

from specviz.decoding.config import GAMMA_LIMIT, MAX_NEW_TOKENS_LIMIT
from specviz.decoding.kvcache import COMPILED_MAX_LENGTH, CachedModel, fit_width
from specviz.models.tiny import tiny_model
from specviz.runs import MAX_PROMPT_TOKENS

WIDTH = 40
MODEL = tiny_model(WIDTH, seed=3)


def test_fit_width_pads_or_cuts_the_vocabulary_axis_whatever_the_row_count():
    """More rows than ids (a long verify on a small vocabulary) must not confuse the two axes."""
    logits = torch.randn(50, 10)
    padded = fit_width(logits, 20)
    assert padded.shape == (50, 20) and torch.equal(padded[:, :10], logits) and bool(torch.isinf(padded[:, 10:]).all())
    assert torch.equal(fit_width(logits, 6), logits[:, :6]) and fit_width(logits, 10) is logits


def test_rollback_keeps_nothing_when_the_first_token_disagrees():
    state = CachedModel(MODEL, WIDTH)
    state.feed([5, 6, 7])
    state.rollback([9, 6, 7, 8])  # the agreeing prefix is empty, though later tokens match
    assert state.ids == [] and state.cache.get_seq_length() == 0


def test_ids_without_an_embedding_row_are_read_as_token_0():
    state = CachedModel(MODEL, WIDTH, embedding_rows=30)
    assert state._input_ids([5, 29, 30, 39]).tolist() == [[5, 29, 0, 0]]
    assert CachedModel(MODEL, WIDTH)._input_ids([5, 39]).tolist() == [[5, 39]]  # without embedding_rows: as given


@torch.inference_mode()
def test_kept_hidden_states_are_the_final_ones_and_the_logits_unchanged():
    """keep_hidden runs the base model and the LM head separately: the logits must equal the plain forward's, and
    each fed token's kept state must be the model's last hidden state (after the final norm) at its position."""
    ids = [3, 14, 15, 9, 2, 6]
    kept, plain = CachedModel(MODEL, WIDTH, keep_hidden=True), CachedModel(MODEL, WIDTH)
    torch.testing.assert_close(kept.feed(ids[:4], logits_to_keep=2), plain.feed(ids[:4], logits_to_keep=2))
    torch.testing.assert_close(kept.feed(ids[4:], logits_to_keep=2), plain.feed(ids[4:], logits_to_keep=2))
    states = MODEL(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0]
    assert kept.fed == [(4, 2, -1), (5, 6, 0)]  # only the last forward's tokens: (position, token, parent)
    for position in (4, 5):
        torch.testing.assert_close(kept.state_at(ids, position), states[position], atol=1e-5, rtol=1e-4)
    assert kept.state_at(ids, 3) is None and kept.state_at(ids[:4] + [7, 6], 5) is None  # not fed, or another path
    assert torch.equal(kept.hidden_before(ids), kept.state_at(ids, 4))  # the state that predicted the newest token


def test_the_compiled_cache_holds_the_longest_run_the_app_allows():
    """A compiled decoder refuses to feed past its static cache: the longest prompt, the most new tokens and the
    longest draft with its bonus token must fit."""
    assert COMPILED_MAX_LENGTH >= MAX_PROMPT_TOKENS + MAX_NEW_TOKENS_LIMIT + GAMMA_LIMIT + 1
