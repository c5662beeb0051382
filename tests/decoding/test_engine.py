"""Exactness and bookkeeping of the engine on tiny random models."""

import threading

import pytest
import torch
from helpers.unequal_widths import PROMPT as UNEQUAL_PROMPT
from helpers.unequal_widths import TOKENS, unequal_pair

from specviz import drafters
from specviz.decoding.config import ConfigError, SpecConfig
from specviz.decoding.engine import EngineError, autoregressive_generate, run_to_end, start_run, verify_phase
from specviz.decoding.kvcache import CachedModel
from specviz.decoding.proposal import Draft
from specviz.decoding.tree import with_alternatives
from specviz.drafters.ngram import lookup_continuation
from specviz.models.tiny import tiny_pair
from specviz.runs import speculative_generate
from specviz.traces.trace import RoundEvent

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):"


@pytest.fixture(scope="module")
def prompt_ids(pair):
    return pair.encode_prompt(PROMPT, chat=False)


@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("schedule", ["constant", "adaptive"])
@pytest.mark.parametrize("gamma", [1, 2, 4, 7])
def test_greedy_equals_target_alone(pair, prompt_ids, drafter, schedule, gamma):
    config = SpecConfig(gamma=gamma, schedule=schedule, drafter=drafter, max_new_tokens=48)
    rounds, spec = run_to_end(speculative_generate(pair, prompt_ids, config))
    _, base = run_to_end(autoregressive_generate(pair, prompt_ids, config))
    assert spec.token_ids == base.token_ids
    assert spec.new_tokens == 48
    # Something was drafted and accepted, so the comparison exercises acceptance, not only corrections.
    assert spec.drafted > 0 and spec.accepted > 0
    assert len(rounds) < 48


def test_greedy_equals_transformers_generate(pair, prompt_ids):
    config = SpecConfig(gamma=4, max_new_tokens=40)
    _, spec = run_to_end(speculative_generate(pair, prompt_ids, config))
    out = pair.target.generate(torch.tensor([prompt_ids]), max_new_tokens=40, do_sample=False, min_new_tokens=40)
    assert list(spec.token_ids) == out[0, len(prompt_ids) :].tolist()


def test_confidence_threshold_shortens_drafts(pair, prompt_ids):
    loose = run_to_end(speculative_generate(pair, prompt_ids, SpecConfig(gamma=8, max_new_tokens=40)))[1]
    strict = run_to_end(
        speculative_generate(pair, prompt_ids, SpecConfig(gamma=8, max_new_tokens=40, draft_confidence=0.99))
    )
    assert all(len(r.drafted) == 1 for r in strict[0])  # the tiny draft is never 99% sure
    assert strict[1].token_ids == loose.token_ids  # and the output is unchanged


def test_adaptive_schedule_rule(pair, prompt_ids):
    config = SpecConfig(gamma=3, gamma_max=6, schedule="adaptive", max_new_tokens=60)
    rounds, _ = run_to_end(speculative_generate(pair, prompt_ids, config))
    for before, after in zip(rounds, rounds[1:], strict=False):
        all_accepted = before.drafted and before.n_accepted == len(before.drafted)
        expected = min(6, before.gamma + 2) if all_accepted else max(1, before.gamma - 1)
        budget = config.max_new_tokens - after.position - 1
        assert after.gamma == min(expected, budget)
    assert len({r.gamma for r in rounds}) > 1


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_events_agree_with_output(pair, prompt_ids, temperature, drafter):
    config = SpecConfig(gamma=4, temperature=temperature, drafter=drafter, max_new_tokens=50, seed=3)
    rounds, summary = run_to_end(speculative_generate(pair, prompt_ids, config))
    produced: list[int] = []
    for r in rounds:
        assert isinstance(r, RoundEvent)
        assert r.position == len(produced)
        verdicts = [d.verdict for d in r.drafted]
        assert verdicts.count("accepted") == r.n_accepted
        assert verdicts[: r.n_accepted] == ["accepted"] * r.n_accepted
        if r.rejection_index is None:
            assert r.n_accepted == len(r.drafted) and r.next_source == "bonus"
        else:
            assert r.rejection_index == r.n_accepted and verdicts[r.n_accepted] == "rejected"
            assert set(verdicts[r.n_accepted + 1 :]) <= {"unchecked"}
            assert r.next_source == "resampled"
        assert list(r.appended) == [d.id for d in r.drafted[: r.n_accepted]] + [r.next_token.id]
        for d in r.drafted:
            assert d.ratio == pytest.approx(min(1.0, d.p / d.q), rel=1e-5)
            assert (d.u is None) == (temperature == 0.0 or d.verdict == "unchecked")
            if d.u is not None:
                assert (d.u < d.ratio) == (d.verdict == "accepted")
        # Target cache: the prompt and all committed tokens but the newest, which goes into the next verify.
        committed_after = len(prompt_ids) + len(produced) + len(r.appended)
        assert r.target_cache_before == committed_after - len(r.appended) - 1
        assert r.target_cache_after == committed_after - 1
        if drafter == "model":
            assert r.draft_cache_after <= committed_after
            assert r.draft_cache_after >= r.target_cache_after - 1 or r.n_accepted < len(r.drafted)
        produced.extend(r.appended)
    assert tuple(produced) == summary.token_ids
    assert summary.accepted == sum(r.n_accepted for r in rounds)
    assert summary.drafted == sum(len(r.drafted) for r in rounds)


def test_rollback_gives_fresh_logits(pair, prompt_ids, monkeypatch):
    """After every feed (including those right after a rejection and crop), the cached logits equal a
    fresh forward pass over the same tokens without a cache."""
    original = CachedModel.feed
    checked = {"feeds": 0, "after_crop": 0}

    def checking_feed(self, new_ids, logits_to_keep=1, committed=None):
        cropped_before = getattr(self, "_was_cropped", False)
        logits = original(self, new_ids, logits_to_keep, committed)
        with torch.inference_mode():
            fresh = self.model(torch.tensor([self.ids])).logits[0, -logits_to_keep:]
        torch.testing.assert_close(logits, fresh, atol=1e-4, rtol=1e-4)
        checked["feeds"] += 1
        checked["after_crop"] += cropped_before
        self._was_cropped = False
        return logits

    original_rollback = CachedModel.rollback

    def marking_rollback(self, committed):
        length = self.length
        original_rollback(self, committed)
        if self.length < length:
            self._was_cropped = True

    monkeypatch.setattr(CachedModel, "feed", checking_feed)
    monkeypatch.setattr(CachedModel, "rollback", marking_rollback)
    config = SpecConfig(gamma=5, temperature=1.0, max_new_tokens=40)
    rounds, _ = run_to_end(speculative_generate(pair, prompt_ids, config))
    assert any(r.rejection_index is not None for r in rounds)
    assert checked["after_crop"] > 0


def test_a_one_token_prompt_is_all_pending(pair):
    """Nothing is processed before the first verify: the one prompt token goes into it."""
    ids = pair.encode_prompt("d", chat=False)
    assert len(ids) == 1
    rounds, spec = run_to_end(speculative_generate(pair, ids, SpecConfig(gamma=3, max_new_tokens=20)))
    out = pair.target.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False, min_new_tokens=20)
    assert list(spec.token_ids) == out[0, 1:].tolist()
    assert rounds[0].target_cache_before == 0 and rounds[0].draft_cache_before == 0


def test_clock_readings_fit_inside_the_run(pair, prompt_ids):
    """Every duration is a difference of two clock reads: non-negative and within the run's own length (a slip such
    as t1 + t0 for t1 - t0 reads about twice the clock, far beyond it). Events count from 0, in time order."""
    config = SpecConfig(gamma=3, max_new_tokens=12)
    rounds, spec = run_to_end(speculative_generate(pair, prompt_ids, config))
    steps, base = run_to_end(autoregressive_generate(pair, prompt_ids, config))
    for summary in (spec, base):
        assert 0 <= summary.prefill_seconds <= summary.seconds
    for i, r in enumerate(rounds):
        assert r.index == i
        assert all(0 <= s <= spec.seconds for s in (r.draft_seconds, r.verify_seconds, r.bookkeeping_seconds))
        assert r.draft_seconds + r.verify_seconds <= r.elapsed <= spec.seconds
    for i, step in enumerate(steps):
        assert step.index == i and 0 <= step.seconds <= step.elapsed <= base.seconds
    for events in (rounds, steps):
        assert [e.elapsed for e in events] == sorted(e.elapsed for e in events)


@pytest.mark.parametrize("repeats", ["d_1", "d_2"])
@torch.inference_mode()
def test_a_kept_sibling_that_repeats_a_drafted_token_reads_its_own_row(pair, prompt_ids, repeats):
    """The verify forward has one row after each sibling of d_n. Where the target's greedy text goes t1 t2 t3 with
    t3 equal to t1 (or t2), draft [t1, t2, wrong] with siblings [other, t3]: t3 is kept, and its bonus must come
    from its own row (after x t1 t2 t3), not from a drafted token's row."""
    _, base = run_to_end(autoregressive_generate(pair, prompt_ids, SpecConfig(max_new_tokens=60)))
    text = list(prompt_ids) + list(base.token_ids)
    back = 2 if repeats == "d_1" else 1
    i = next(i for i in range(len(prompt_ids), len(text) - 3) if text[i + 2] == text[i + 2 - back])
    t1, t2, t3 = text[i : i + 3]
    wrong, other = [t for t in range(pair.target.config.vocab_size) if t not in (t1, t2, t3)][:2]
    run = start_run(pair, [text[:i]], SpecConfig(gamma=3, alternatives=2), drafters.factory("model"))
    uniform = torch.full((3, pair.target.config.vocab_size), 1.0 / pair.target.config.vocab_size, device=pair.device)
    ((p, decision),) = verify_phase(run, [with_alternatives(Draft([t1, t2, wrong], uniform, 0), [other, t3])])
    assert decision.kept == [t1, t2, t3] and decision.tree_path == (1,)  # t3, the second sibling of d_3
    assert decision.next_row == 5  # rows: after the pending token, t1, t2, wrong; then after other, after t3
    assert decision.next_token == text[i + 3]  # what the target alone says next
    fresh = pair.target(torch.tensor([text[: i + 3]])).logits[0, -1]
    torch.testing.assert_close(p[decision.next_row], torch.softmax(fresh, -1), atol=1e-4, rtol=1e-4)


def test_rollback_crops_to_common_prefix(pair):
    state = CachedModel(pair.target, pair.target.config.vocab_size)
    state.feed([5, 6, 7, 8, 9])
    state.rollback([5, 6, 7, 1, 2])
    assert state.ids == [5, 6, 7]
    assert state.cache.get_seq_length() == 3
    assert state.pending([5, 6, 7, 1, 2]) == [1, 2]
    state.feed([1, 2])
    state.rollback([5, 6, 7, 1, 2])  # all committed tokens cached: the newest is dropped, to be fed again
    assert state.ids == [5, 6, 7, 1] and state.cache.get_seq_length() == 4


def test_eos_ends_the_run(pair, prompt_ids):
    config = SpecConfig(gamma=4, max_new_tokens=40)
    _, free = run_to_end(speculative_generate(pair, prompt_ids, config))
    eos = free.token_ids[10]
    pair.target.generation_config.eos_token_id = eos
    try:
        rounds, spec = run_to_end(speculative_generate(pair, prompt_ids, config))
        _, base = run_to_end(autoregressive_generate(pair, prompt_ids, config))
    finally:
        pair.target.generation_config.eos_token_id = None
    first = free.token_ids.index(eos)
    assert spec.finish_reason == base.finish_reason == "eos"
    assert spec.token_ids == base.token_ids == free.token_ids[: first + 1]
    assert rounds[-1].appended[-1] == eos
    # The drafters stop at an end-of-sequence token: nothing drafted after it could be kept.
    assert all(eos not in [d.id for d in r.drafted[:-1]] for r in rounds)


@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_drafts_stop_at_end_of_sequence(pair, prompt_ids, drafter):
    config = SpecConfig(gamma=8, max_new_tokens=60, drafter=drafter, lookahead=8)
    free_rounds, _ = run_to_end(speculative_generate(pair, prompt_ids, config))
    drafted = [d.id for r in free_rounds for d in r.drafted[:-1]]
    eos = max(set(drafted), key=drafted.count)  # a token the drafter proposes mid-draft often
    pair.target.generation_config.eos_token_id = eos
    try:
        rounds, _ = run_to_end(speculative_generate(pair, prompt_ids, config))
    finally:
        pair.target.generation_config.eos_token_id = None
    assert all(eos not in [d.id for d in r.drafted[:-1]] for r in rounds)
    assert any(r.drafted and r.drafted[-1].id == eos for r in rounds), "no draft ever met the EOS: proves nothing"


def test_cancel_stops_between_rounds(pair, prompt_ids):
    cancel = threading.Event()
    events = speculative_generate(pair, prompt_ids, SpecConfig(gamma=2, max_new_tokens=60), cancel=cancel)
    first = next(events)
    cancel.set()
    rest = list(events)
    assert isinstance(first, RoundEvent)
    assert len(rest) == 1 and rest[0].finish_reason == "cancelled"
    assert rest[0].token_ids == first.appended


def test_max_new_tokens_is_exact(pair, prompt_ids):
    for n in (1, 2, 3, 17):
        _, summary = run_to_end(speculative_generate(pair, prompt_ids, SpecConfig(gamma=6, max_new_tokens=n)))
        assert summary.new_tokens == n


def test_ngram_without_draft_model(prompt_ids):
    pair = tiny_pair()
    pair.draft = None
    _, summary = run_to_end(speculative_generate(pair, prompt_ids, SpecConfig(drafter="ngram", max_new_tokens=10)))
    assert summary.new_tokens == 10
    for needs_one in ("model", "controller"):  # refused before the run starts, by the registry's capability
        with pytest.raises(drafters.DrafterError, match="no draft model, which the .* drafter needs"):
            run_to_end(speculative_generate(pair, prompt_ids, SpecConfig(drafter=needs_one, max_new_tokens=10)))


def test_empty_prompt_is_refused(pair):
    with pytest.raises(EngineError, match="empty"):
        run_to_end(speculative_generate(pair, [], SpecConfig()))


@pytest.mark.parametrize(
    "bad",
    [
        dict(gamma=0),
        dict(max_new_tokens=0),
        dict(max_new_tokens=10**6),
        dict(temperature=-0.1),
        dict(top_p=0.0),
        dict(top_p=1.5),
        dict(top_k=-1),
    ],
)
def test_bad_config_is_refused(bad):
    with pytest.raises(ConfigError):
        SpecConfig(**bad).validate()


def test_lookup_continuation():
    assert lookup_continuation([1, 2, 3, 9, 1, 2, 3], gamma=3, max_ngram=3) == [9, 1, 2]
    assert lookup_continuation([1, 2, 3, 4], gamma=3, max_ngram=3) == []
    assert lookup_continuation([7, 5, 8, 5], gamma=2, max_ngram=2) == [8, 5]  # falls back to a 1-gram


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_lookahead_drafts_the_same_tokens_with_fewer_forwards(pair, prompt_ids, temperature):
    """Prompt-lookup guesses only save draft forwards: each d_i is still drawn from its own q_i (same
    generator draws in the same order), so drafts, q, verdicts and output match one-token drafting."""

    def run(lookahead):
        config = SpecConfig(
            gamma=6, temperature=temperature, seed=0, max_new_tokens=60, lookahead=lookahead
        )  # seed 5: no guess drawn at T=1
        return run_to_end(speculative_generate(pair, prompt_ids, config))

    (plain_rounds, plain), (look_rounds, look) = run(0), run(6)
    assert look.token_ids == plain.token_ids
    assert [[d.id for d in r.drafted] for r in look_rounds] == [[d.id for d in r.drafted] for r in plain_rounds]
    for a, b in zip(look_rounds, plain_rounds, strict=True):
        assert [d.q for d in a.drafted] == pytest.approx([d.q for d in b.drafted], abs=1e-5)
        assert [d.verdict for d in a.drafted] == [d.verdict for d in b.drafted]
        # A token whose q came with a lookup guess cost no forward of its own.
        assert a.draft_forwards == len(a.drafted) - sum(d.from_lookahead for d in a.drafted)
    assert not any(d.from_lookahead for r in plain_rounds for d in r.drafted)
    assert any(d.from_lookahead for r in look_rounds for d in r.drafted), "no lookahead guess was ever drawn"
    assert look.draft_forwards <= plain.draft_forwards
    if temperature == 0.0:
        assert look.draft_forwards < plain.draft_forwards  # the tiny target's greedy text loops: guesses hit


@pytest.mark.parametrize("rows", [1, 3])
@torch.inference_mode()
def test_lookahead_keeps_the_draft_cache_consistent(pair, prompt_ids, rows):
    """Wrong guesses are cut from the draft's cache: after a round and a rollback its next logits are
    those of a fresh forward over the committed text, for one row (CachedModel) and for each row of a batch
    (BatchCache, whose rows hold different lengths)."""
    from specviz.decoding.sampling import build_warpers
    from specviz.drafters.model import ModelDrafter

    config = SpecConfig(gamma=8)
    drafter = ModelDrafter(pair.draft, pair.draft.config.vocab_size, lookahead=8, rows=rows)
    committed = [list(prompt_ids)[: len(prompt_ids) - r] for r in range(rows)]
    for step in range(6):
        drafts = drafter.propose(committed, [8 - r for r in range(rows)], build_warpers(config), None, True, 0.0)
        assert drafter.state.cache.get_seq_length() == drafter.state.length
        held = drafter.state.ids if rows > 1 else [drafter.state.ids]
        for r, draft in enumerate(drafts):
            assert held[r][: len(committed[r]) + len(draft.ids) - 1] == committed[r] + draft.ids[:-1]
        # a partial accept and a correction, a different share in each row
        pairs = enumerate(zip(committed, drafts, strict=True))
        committed = [c + d.ids[: len(d.ids) // (2 + r + step % 2)] + [7] for r, (c, d) in pairs]
        drafter.rollback(committed)
        held = drafter.state.ids if rows > 1 else [drafter.state.ids]
        assert all(h == c[: len(h)] for h, c in zip(held, committed, strict=True))
    logits = drafter.state.feed_rows(drafter.state.pending_rows(committed))[:, -1]
    for r, row in enumerate(committed):
        fresh = pair.draft(torch.tensor([row])).logits[0, -1]
        torch.testing.assert_close(logits[r], fresh, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "options", [{}, {"lookahead": 4}, {"alternatives": 2}], ids=["plain", "lookahead", "alternatives"]
)
@pytest.mark.parametrize("target_rows, draft_rows", [(29, 32), (32, 29)], ids=["wider draft", "wider target"])
def test_unequal_widths_greedy_equals_target_alone(target_rows, draft_rows, options):
    """A draft wider than the target never proposes an id the target cannot embed (its extra ids are masked out of
    q); a draft narrower than the target reads the target-only ids it has no row for. Either way greedy output is
    the target's own."""
    for seed in range(3):
        pair = unequal_pair(target_rows, draft_rows, seed=seed)
        ids = pair.encode_prompt(UNEQUAL_PROMPT, chat=False)
        config = SpecConfig(gamma=4, max_new_tokens=40, **options)
        rounds, spec = run_to_end(speculative_generate(pair, ids, config))
        _, base = run_to_end(autoregressive_generate(pair, ids, config))
        out = pair.target.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False, min_new_tokens=40)
        assert spec.token_ids == base.token_ids == tuple(out[0, len(ids) :].tolist())
        drafted = [d.id for r in rounds for d in r.drafted + r.alternatives]
        assert drafted and max(drafted) < target_rows and spec.accepted > 0
        if target_rows > draft_rows:  # the draft really met ids it has no embedding for
            assert max(spec.token_ids) >= TOKENS


@pytest.mark.parametrize("target_rows, draft_rows", [(29, 32), (32, 29)], ids=["wider draft", "wider target"])
def test_unequal_widths_sampling_runs(target_rows, draft_rows):
    pair = unequal_pair(target_rows, draft_rows)
    ids = pair.encode_prompt(UNEQUAL_PROMPT, chat=False)
    for seed in range(5):
        config = SpecConfig(gamma=4, temperature=1.0, alternatives=2, lookahead=3, seed=seed, max_new_tokens=30)
        rounds, spec = run_to_end(speculative_generate(pair, ids, config))
        assert spec.new_tokens == 30 and max(d.id for r in rounds for d in r.drafted) < target_rows
        assert all(d.q > 0 for r in rounds for d in r.drafted)
