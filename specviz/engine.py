"""Speculative decoding and its baseline, as generators of trace events.

The engine knows token ids only. Per-run state (KV caches, the torch.Generator, the cancel flag)
lives in the call; the shared models are never mutated. Notation: p = target, q = draft,
gamma = draft length.

One round, with committed tokens x (DESIGN.md):
  1. draft   d_i ~ q_i = transform(draft logits | x, d_<i),  i = 1..gamma  (stops early at low draft
             confidence or an end-of-sequence token; with lookahead, one draft forward scores prompt-lookup
             guesses and yields several rows of q)
  2. verify  one target forward over [x_last, d_1..d_gamma] gives p_1..p_{gamma+1} (with alternatives, the
             same forward also scores other candidates c_1..c_k for the last position: a small token tree)
  3. accept  d_i while u_i <= min(1, p_i(d_i) / q_i(d_i)); at the first rejection j draw from
             norm(max(0, p_j - q_j)); if all are accepted draw a bonus token from p_{gamma+1}
             (greedy: accept while d_i == argmax p_i; the correction or bonus is argmax p). If the last
             draft is rejected, its alternatives are checked first by recursive rejection sampling, and a
             kept one is followed by a bonus token from the target's row after it (see verify)
  4. roll both KV caches back to the committed tokens (DynamicCache.crop)

gamma per round: "constant" (config.gamma), "adaptive" (+2 after an all-accepted round, -1 otherwise)
or "auto" (AutoSchedule: drafts up to gamma_max tokens while the draft is confident, and takes plain
target steps, gamma 0, while speculation measurably does not pay).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import torch

from .config import SpecConfig
from .drafters import Draft, Drafter, ModelDrafter, NgramDrafter
from .errors import UserError
from .kvcache import CachedModel
from .sampling import acceptance_ratio, build_warpers, probabilities, residual, sample
from .trace import DraftedToken, Event, FinishReason, RoundEvent, RunSummary, TokenEvent, TokenProb


class EngineError(UserError, RuntimeError):
    """A run that cannot start with this pair and these settings."""


def vocab_width(pair) -> int:
    """Common width of p and q: the wider head; the narrower one's missing ids get probability 0."""
    widths = [pair.target.config.get_text_config().vocab_size]
    if pair.draft is not None:
        widths.append(pair.draft.config.get_text_config().vocab_size)
    return max(widths)


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels so that a clock read measures the work, not its launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def make_generator(device: torch.device, seed: int) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def make_drafter(pair, config: SpecConfig, width: int) -> Drafter:
    if config.drafter == "ngram":
        return NgramDrafter(config.ngram_size, pair.eos_ids)
    if pair.draft is None:
        raise EngineError("this pair has no draft model: choose the n-gram drafter or load a draft model")
    return ModelDrafter(pair.draft, width, config.lookahead, config.ngram_size, pair.eos_ids)


def next_gamma(config: SpecConfig, gamma: int, drafted: int, accepted: int) -> int:
    """Adaptive schedule: +2 after a round whose drafts were all accepted, -1 otherwise, within [1, gamma_max]."""
    if config.schedule == "constant":
        return config.gamma
    if drafted > 0 and accepted == drafted:
        return min(config.gamma_max, gamma + 2)
    return max(1, gamma - 1)


AUTO_CONFIDENCE = 0.7   # the auto schedule's draft-confidence stop when the config leaves it at 0


class AutoSchedule:
    """Schedule "auto": speculate while it measurably pays, else take plain target steps (gamma 0).

    Per run (never stored on a model), from the rounds' own wall-clock times:
      rate_spec  = (T + w * PRIOR_TOKENS) / (S + w * t_plain)   tokens per second of speculative rounds:
                   T and S are the tokens committed and the seconds spent (draft, verify, bookkeeping) by
                   the speculative rounds so far, each older round discounted by DISCOUNT; the prior is
                   w = PRIOR_ROUNDS imagined rounds that each commit PRIOR_TOKENS in a plain step's time
      rate_plain = 1 / t_plain   t_plain: moving average of a plain round's seconds; until one is timed,
                   the shortest verify seen (a verify of g+1 tokens costs at least one step)
    Every round speculates while rate_spec >= rate_plain, else it is a plain step (which times t_plain);
    during plain steps T and S fade (PLAIN_DISCOUNT) toward the optimistic prior, so speculation is tried
    again after a while. While t_plain is only estimated and speculation is not clearly ahead
    (rate_spec < CLEAR_LEAD * rate_plain), one plain step is taken to time it: where a verify costs
    several steps (MKL kernels, say) the estimate flatters plain decoding's rival. Rounds that processed
    the prompt (fuse_prompt) are not timed.
    The prior's weight trades reaction against noise: replayed with the built-in pair's costs, it keeps
    within 2% of never stopping where speculation pays everywhere (this CPU with prepacked weights), and
    where a verify costs 1.6-2.6 steps it lifts prose from 0.79-0.92x to 0.85-0.95x of plain decoding.
    A speculative round drafts up to gamma_max tokens and stops at the first token whose draft top
    probability is below the confidence threshold: the draft is well calibrated (on the built-in pair the
    share of its tokens the target accepts is close to that probability), so it sets each draft's length.
    Why not pick gamma from Leviathan's i.i.d. model, argmax_g E(a, g) / (g t_draft + t_verify(g))?
    Acceptance is bursty (long accepted runs in code, short ones in prose), so the i.i.d. model caps long
    drafts too early and predicts losses that do not happen; replayed on recorded acceptance data with
    the measured costs of the built-in pair, it was 5-20% slower than this rule. Nor does a stop on the chain's
    cumulative confidence (the product of q's top probabilities) help: replayed the same way on all five prompt
    categories, cutting chains where it falls below 0.3-0.7, or at the verify curve's step from 6 to 7 tokens, was
    at best 1% faster and up to 15% slower: long confident chains pay even past that step. A rule that reacts to
    single rounds (no prior, no pooling) switched speculation off on prose and translations where it paid.
    """
    DISCOUNT = 0.9
    PLAIN_DISCOUNT = 0.9
    PRIOR_TOKENS = 2.0
    PRIOR_ROUNDS = 2.0
    CLEAR_LEAD = 1.5
    PLAIN_EMA = 0.7

    def __init__(self, config: SpecConfig):
        self.gamma_max = config.gamma_max
        self.tokens = 0.0                       # T: discounted tokens of speculative rounds
        self.seconds = 0.0                      # S: their discounted seconds
        self.plain_seconds: float | None = None # t_plain, measured
        self.shortest_verify: float | None = None

    def t_plain(self) -> float | None:
        return self.plain_seconds if self.plain_seconds is not None else self.shortest_verify

    def rates(self) -> tuple[float, float]:
        """(rate_spec, rate_plain) in tokens per second; only defined once t_plain is known or estimated."""
        t_plain, w = self.t_plain(), self.PRIOR_ROUNDS
        return (self.tokens + w * self.PRIOR_TOKENS) / (self.seconds + w * t_plain), 1.0 / t_plain

    def next(self) -> int:
        if self.t_plain() is None:
            return self.gamma_max
        spec, plain = self.rates()
        if self.plain_seconds is None and spec < self.CLEAR_LEAD * plain:
            return 0                            # time one plain step (once: then plain_seconds is known)
        return self.gamma_max if spec >= plain else 0

    def observe(self, drafted: int, committed: int, seconds: float, with_prompt: bool = False,
                verify_seconds: float | None = None) -> None:
        if with_prompt:
            return
        if drafted == 0:
            step = seconds / max(committed, 1)
            self.plain_seconds = step if self.plain_seconds is None else (
                self.PLAIN_EMA * self.plain_seconds + (1 - self.PLAIN_EMA) * step)
            self.tokens *= self.PLAIN_DISCOUNT
            self.seconds *= self.PLAIN_DISCOUNT
            return
        self.tokens = self.DISCOUNT * self.tokens + committed
        self.seconds = self.DISCOUNT * self.seconds + seconds
        if verify_seconds is not None:
            self.shortest_verify = min(verify_seconds, self.shortest_verify or verify_seconds)


@dataclass(frozen=True)
class Verdict:
    kept: list[int]                   # drafted tokens the target kept: the accepted prefix, then a kept alternative
    rejection_index: int | None       # index into the draft of the first rejected token; None if all accepted
    next_token: int
    next_prob: float                  # probability of next_token under the distribution it came from
    next_row: int                     # the row of p the next token came from, if it is a bonus
    u: list[float | None]             # draws used, one per checked drafted token
    ratios: list[float]               # min(1, p/q) per drafted token
    residual_row: torch.Tensor | None # the distribution a correction was drawn from (norm(max(0, p_j - q_j)))
    alternative: int | None = None    # index of the kept alternative
    alternative_u: list[float | None] = field(default_factory=list)  # per checked alternative
    alternative_ratios: list[float] = field(default_factory=list)

    @property
    def n_accepted(self) -> int:
        return len(self.kept)

    @property
    def corrected(self) -> bool:
        """The next token replaces a rejected draft (else it is a bonus, after all drafts or a kept alternative)."""
        return self.rejection_index is not None and self.alternative is None


def draw_alternatives(q_last: torch.Tensor, chosen: int, count: int, generator: torch.Generator | None,
                      greedy: bool) -> list[int]:
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


def verify(p: torch.Tensor, draft: Draft, generator: torch.Generator | None, greedy: bool,
           alternatives: Sequence[int] = (), alternative_rows: dict[int, int] | None = None) -> Verdict:
    """Step 3 of the round: accept a prefix of the draft, then resample or take the bonus token.

    p: [n + 1 (+ siblings), V] target probabilities at the n drafted positions and one more, then one row
    after each distinct alternative (alternative_rows: token -> its row).
    Alternatives c_1..c_k to the last drafted token d_n are checked only when d_n itself is rejected, by
    recursive rejection sampling: with r_0 = norm(max(0, p_n - q_n)), keep c_m with probability
    min(1, r_{m-1}(c_m) / q_n(c_m)), else r_m = norm(max(0, r_{m-1} - q_n)); if none is kept, the correction is
    drawn from r_k. Each step is speculative sampling of r_{m-1} with proposal q_n, so the token at position n
    still follows p_n exactly (greedy: keep the alternative that is argmax p_n, else correct to argmax p_n).
    A kept alternative is followed by a bonus token from the target's row after it.
    """
    n = len(draft.ids)
    ids = torch.tensor(draft.ids, dtype=torch.long, device=p.device)
    rows = torch.arange(n, device=p.device)
    p_of_d = p[rows, ids]
    q_of_d = draft.q[rows, ids] if draft.q is not None else torch.ones_like(p_of_d)  # n-gram: point mass
    ratios = acceptance_ratio(p_of_d, q_of_d).tolist()
    if greedy:
        matches = (p[:n].argmax(dim=-1) == ids).tolist()
        draws: list[float | None] = [None] * n
    else:
        u = torch.rand(n, generator=generator, device=p.device).tolist()
        matches = [u_i <= r_i for u_i, r_i in zip(u, ratios)]
        draws = list(u)
    j = next((i for i, ok in enumerate(matches) if not ok), n)
    if j == n:  # bonus token from p_{n+1}
        token = int(sample(p[n:n + 1], generator, greedy)[0])
        return Verdict(draft.ids, None, token, float(p[n, token]), n, draws, ratios, None)
    q_j = draft.q[j] if draft.q is not None else torch.nn.functional.one_hot(ids[j], p.shape[-1]).to(p.dtype)
    res = residual(p[j], q_j)
    alt_u: list[float | None] = []
    alt_ratios: list[float] = []
    target_token = int(p[j].argmax())
    if j == n - 1 and alternatives:
        for m, candidate in enumerate(alternatives):
            if greedy:
                alt_ratios.append(float(acceptance_ratio(p[j, candidate], q_j[candidate])))
                alt_u.append(None)
                kept = candidate == target_token
            else:
                alt_ratios.append(float(acceptance_ratio(res[candidate], q_j[candidate])))
                alt_u.append(float(torch.rand(1, generator=generator, device=p.device)))
                kept = alt_u[-1] <= alt_ratios[-1]
            if kept:
                row = alternative_rows[candidate]
                token = int(sample(p[row:row + 1], generator, greedy)[0])
                return Verdict(draft.ids[:j] + [candidate], j, token, float(p[row, token]), row, draws[:j + 1],
                               ratios, None, m, alt_u, alt_ratios)
            if not greedy:
                res = residual(res, q_j)
    # Greedy: the correction is argmax p_j, the token the target alone would have produced.
    token = target_token if greedy else int(sample(res[None], generator, False)[0])
    return Verdict(draft.ids[:j], j, token, float(p[j, token] if greedy else res[token]), j, draws[:j + 1], ratios,
                   res, None, alt_u, alt_ratios)


def _top(probs: torch.Tensor, k: int, text: Callable[[int], str]) -> tuple[TokenProb, ...]:
    values, indices = torch.topk(probs, min(k, probs.shape[-1]))
    return tuple(TokenProb(int(i), text(int(i)), float(v)) for v, i in zip(values.tolist(), indices.tolist()))


def _round_event(index, position, gamma, draft, alternatives, p, verdict, appended, caches, timings, elapsed,
                 config, text) -> RoundEvent:
    """Turn one round into an event: plain numbers and text only."""
    ids = draft.ids
    rows = torch.arange(len(ids), device=p.device)
    id_tensor = torch.tensor(ids, dtype=torch.long, device=p.device)
    p_of_d = p[rows, id_tensor].tolist() if ids else []
    q_of_d = draft.q[rows, id_tensor].tolist() if draft.q is not None and ids else [1.0] * len(ids)
    rejection = verdict.rejection_index if verdict.rejection_index is not None else len(ids)
    drafted = []
    for i, token in enumerate(ids):
        verdict_i = "accepted" if i < rejection else ("rejected" if i == rejection else "unchecked")
        u = verdict.u[i] if i < len(verdict.u) else None
        lookahead = i < len(draft.from_lookahead) and draft.from_lookahead[i]
        drafted.append(DraftedToken(token, text(token), q_of_d[i], p_of_d[i], verdict.ratios[i], u, verdict_i, lookahead))
    branch = []
    for m, token in enumerate(alternatives):   # p and q at the last drafted position, where they compete with d_n
        checked = m < len(verdict.alternative_ratios)
        verdict_m = "unchecked" if not checked else ("accepted" if m == verdict.alternative else "rejected")
        branch.append(DraftedToken(
            token, text(token), float(draft.q[-1, token]), float(p[len(ids) - 1, token]),
            verdict.alternative_ratios[m] if checked else float(acceptance_ratio(p[len(ids) - 1, token], draft.q[-1, token])),
            verdict.alternative_u[m] if checked else None, verdict_m))
    at = verdict.rejection_index if verdict.corrected else verdict.next_row  # where the next token came from
    k = config.record_top
    top_q = _top(draft.q[at], k, text) if verdict.corrected and draft.q is not None else ()
    top_res = _top(verdict.residual_row, k, text) if verdict.corrected else ()
    return RoundEvent(
        index=index, position=position, gamma=gamma, drafted=tuple(drafted),
        n_accepted=verdict.n_accepted, rejection_index=verdict.rejection_index,
        next_token=TokenProb(verdict.next_token, text(verdict.next_token), verdict.next_prob),
        next_source="resampled" if verdict.corrected else "bonus",
        top_p=_top(p[at], k, text), top_q=top_q, top_residual=top_res, appended=tuple(appended),
        target_cache_before=caches[0], target_cache_after=caches[1],
        draft_cache_before=caches[2], draft_cache_after=caches[3],
        draft_seconds=timings[0], verify_seconds=timings[1], draft_forwards=draft.forwards, elapsed=elapsed,
        alternatives=tuple(branch),
    )


def _alternatives(draft: Draft, config: SpecConfig, confidence: float, branching: bool,
                  generator: torch.Generator) -> list[int]:
    """Candidates besides the last drafted token, when the draft was unsure of it (its top q below the
    confidence threshold; always without one). Rejections happen mostly there: the draft stops at its
    first unsure token. The target checks them in the same verify forward; on this CPU a verify of up to
    about 6 tokens costs what one step costs, so the extra rows are nearly free.
    Tried and dropped, on the built-in pair: 3 or 4 candidates (at most 3% fewer target forwards than 2, and no
    time saved), and a second level (one more draft forward over d_n and its alternatives drafts a token after
    each, all inside the verify's flat 6 rows): it cut target forwards by up to 10% but cost more draft time than
    it saved (prose -3%, math -6%, code +4% in one A/B of 16 prompts)."""
    if not branching or not draft.ids or draft.q is None:
        return []
    q_last = draft.q[-1]
    if confidence > 0 and float(q_last.max()) >= confidence:
        return []
    return draw_alternatives(q_last, draft.ids[-1], config.alternatives, generator, config.greedy)


def _cut_at_eos(tokens: list[int], eos: frozenset[int]) -> tuple[list[int], bool]:
    for i, token in enumerate(tokens):
        if token in eos:
            return tokens[:i + 1], True
    return tokens, False


def _check_prompt(prompt_ids: list[int]) -> list[int]:
    if not prompt_ids:
        raise EngineError("the prompt is empty: type some text first")
    return list(prompt_ids)


@torch.inference_mode()
def speculative_generate(pair, prompt_ids: list[int], config: SpecConfig,
                         cancel: threading.Event | None = None) -> Iterator[Event]:
    """Yield one RoundEvent per draft-and-verify round, then a RunSummary."""
    config.validate()
    committed = _check_prompt(prompt_ids)
    prompt_length = len(committed)
    device = pair.target.device
    width = vocab_width(pair)
    warpers = build_warpers(config)
    generator = make_generator(device, config.seed)
    drafter = make_drafter(pair, config, width)
    target = CachedModel(pair.target, width)
    text = pair.token_text
    eos = pair.eos_ids

    synchronize(device)
    start = time.perf_counter()
    # The prompt is processed once; its last token goes into the first verify. With fuse_prompt, all of it
    # goes into the first round (the draft's first forward and the target's first verify).
    if len(committed) > 1 and not config.fuse_prompt:
        target.feed(committed[:-1])
        drafter.prefill(committed[:-1])
    synchronize(device)
    prefill_seconds = time.perf_counter() - start

    auto = AutoSchedule(config) if config.schedule == "auto" else None
    confidence = config.draft_confidence or (AUTO_CONFIDENCE if auto is not None else 0.0)
    gamma = auto.next() if auto is not None else config.gamma
    branching = config.alternatives > 0 and target.can_branch
    finish: FinishReason = "length"
    totals = {"drafted": 0, "accepted": 0, "draft": 0.0, "verify": 0.0, "forwards": 0, "book": 0.0}
    rounds = 0
    while True:
        produced = len(committed) - prompt_length
        if produced >= config.max_new_tokens:
            break
        if cancel is not None and cancel.is_set():
            finish = "cancelled"
            break
        caches_before = (target.length, drafter.cache_length)
        # Never draft past the budget: accepted + the next token must fit.
        draft_length = min(gamma, config.max_new_tokens - produced - 1)

        t0 = time.perf_counter()
        if draft_length > 0:
            draft = drafter.propose(committed, draft_length, warpers, generator, config.greedy, confidence)
        else:
            draft = Draft([], None, 0)
        alternatives = _alternatives(draft, config, confidence, branching, generator)
        synchronize(device)
        t1 = time.perf_counter()
        chain = target.pending(committed) + draft.ids
        siblings = list(dict.fromkeys(t for t in alternatives if t != draft.ids[-1]))  # distinct, fed once each
        # One forward over the chain and the siblings of its last token (a small token tree; none: a plain feed).
        logits = target.feed_branches(chain, siblings, chain_rows=len(draft.ids) + 1)
        p = probabilities(logits, warpers)                         # p_1..p_{n+1}, then one row after each sibling
        rows = {token: len(draft.ids) + 1 + i for i, token in enumerate(siblings)}
        if draft.ids:
            rows[draft.ids[-1]] = len(draft.ids)                  # after d_n itself: the bonus row
        verdict = verify(p, draft, generator, config.greedy, alternatives, rows)
        synchronize(device)
        t2 = time.perf_counter()

        appended = verdict.kept + [verdict.next_token]
        appended, hit_eos = _cut_at_eos(appended, eos)
        committed.extend(appended)
        target.rollback(committed)
        drafter.rollback(committed)
        t3 = time.perf_counter()
        event = _round_event(
            rounds, produced, draft_length, draft, alternatives, p, verdict, appended,
            (caches_before[0], target.length, caches_before[1], drafter.cache_length),
            (t1 - t0, t2 - t1), t3 - start, config, text)
        book = time.perf_counter() - t3
        round_seconds = t3 + book - t0                            # before the yield: the consumer's time is not ours
        event = replace(event, bookkeeping_seconds=book)
        rounds += 1
        totals["drafted"] += len(draft.ids)
        totals["accepted"] += verdict.n_accepted
        totals["draft"] += t1 - t0
        totals["verify"] += t2 - t1
        totals["forwards"] += draft.forwards
        totals["book"] += book
        yield event
        if auto is not None:
            auto.observe(len(draft.ids), len(appended), round_seconds, with_prompt=rounds == 1 and config.fuse_prompt,
                         verify_seconds=t2 - t1)
            gamma = auto.next()
        else:
            chain_accepted = len(draft.ids) if verdict.rejection_index is None else verdict.rejection_index
            gamma = next_gamma(config, gamma, len(draft.ids), chain_accepted)
        if hit_eos:
            finish = "eos"
            break

    seconds = time.perf_counter() - start
    new_ids = committed[prompt_length:]
    yield RunSummary(
        method="speculative", token_ids=tuple(new_ids), text=pair.decode(new_ids), new_tokens=len(new_ids),
        rounds=rounds, drafted=totals["drafted"], accepted=totals["accepted"],
        acceptance_rate=totals["accepted"] / totals["drafted"] if totals["drafted"] else 0.0,
        mean_accepted_per_round=totals["accepted"] / rounds if rounds else 0.0,
        seconds=seconds, prefill_seconds=prefill_seconds,
        tokens_per_second=_rate(len(new_ids), seconds - prefill_seconds), finish_reason=finish,
        draft_seconds=totals["draft"], verify_seconds=totals["verify"], draft_forwards=totals["forwards"],
        bookkeeping_seconds=totals["book"],
    )


def _rate(tokens: int, seconds: float) -> float:
    """Decode rate: new tokens per second after the (equal for both methods) prompt prefill."""
    return tokens / seconds if seconds > 0 else 0.0


@torch.inference_mode()
def autoregressive_generate(pair, prompt_ids: list[int], config: SpecConfig,
                            cancel: threading.Event | None = None) -> Iterator[Event]:
    """The baseline: the target alone, same transform, KV cache, one TokenEvent per token, then a RunSummary."""
    config.validate()
    committed = _check_prompt(prompt_ids)
    prompt_length = len(committed)
    device = pair.target.device
    warpers = build_warpers(config)
    generator = make_generator(device, config.seed)
    target = CachedModel(pair.target, vocab_width(pair))
    text = pair.token_text
    eos = pair.eos_ids

    synchronize(device)
    start = time.perf_counter()
    if len(committed) > 1 and not config.fuse_prompt:
        target.feed(committed[:-1])
    synchronize(device)
    prefill_seconds = time.perf_counter() - start

    finish: FinishReason = "length"
    while len(committed) - prompt_length < config.max_new_tokens:
        if cancel is not None and cancel.is_set():
            finish = "cancelled"
            break
        t0 = time.perf_counter()
        p = probabilities(target.feed(target.pending(committed)), warpers)
        token = int(sample(p, generator, config.greedy)[0])
        synchronize(device)
        t1 = time.perf_counter()
        committed.append(token)
        yield TokenEvent(len(committed) - prompt_length - 1, TokenProb(token, text(token), float(p[0, token])),
                         t1 - t0, t1 - start)
        if token in eos:
            finish = "eos"
            break

    seconds = time.perf_counter() - start
    new_ids = committed[prompt_length:]
    yield RunSummary(
        method="autoregressive", token_ids=tuple(new_ids), text=pair.decode(new_ids), new_tokens=len(new_ids),
        rounds=len(new_ids), drafted=0, accepted=0, acceptance_rate=0.0, mean_accepted_per_round=0.0,
        seconds=seconds, prefill_seconds=prefill_seconds,
        tokens_per_second=_rate(len(new_ids), seconds - prefill_seconds), finish_reason=finish,
        verify_seconds=seconds - prefill_seconds,
    )


def run_to_end(events: Iterator[Event]) -> tuple[list, RunSummary]:
    """Drain a generator: (the per-round or per-token events, the summary)."""
    steps = []
    for event in events:
        if isinstance(event, RunSummary):
            return steps, event
        steps.append(event)
    raise EngineError("the run ended without a summary")
