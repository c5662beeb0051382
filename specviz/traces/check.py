"""Reading a trace file that anyone may have made: bounded JSON parsing, typed fields, and the agreements
every run the engine records satisfies.

trace.py reads the fields through pydantic models made of the types below, builds its dataclasses and then calls
check_trace; any refusal is one line naming the field, which trace.py raises as TraceError. Why each rule
and cap: see docs/DESIGN.md, "Trace files".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    TypeAdapter,
    ValidationError,
    create_model,
)
from pydantic_core import core_schema

from specviz.decoding.config import GAMMA_LIMIT, MAX_NEW_TOKENS_LIMIT, RECORD_TOP_LIMIT
from specviz.decoding.events import RoundEvent, RunSummary, Trace
from specviz.drafters import drafter_class, model_drafted
from specviz.errors import refusal

from .refused import Refused, expect, show
from .tree import off_chain

# Caps: generous for any real run (the engine's own limits, or several times runs.py's), small enough that a
# view of the largest trace stays cheap.
MAX_FILE_BYTES = 32 * 2**20
MAX_JSON_OBJECTS = 1_000_000  # a real trace has at most about 250 000 (1024 rounds of up to 240 records)
MAX_JSON_ARRAYS = 1_000_000  # counted as '[' bytes, strings included; a real trace has about 7 per round
MAX_JSON_KEYS = 256  # in one object (a round has 25): each unknown one would be an error of its own
MAX_TOKEN_ID = 2**31  # ids are below this, and below pair["vocab_size"] when the file names one
MAX_PROMPT_IDS = 8192  # runs.MAX_PROMPT_TOKENS is 2048
MAX_PROMPT_CHARS = 32_000  # runs.MAX_PROMPT_CHARS is 8000
MAX_TOKEN_CHARS = 1024  # one token's text
MAX_TEXT_CHARS = MAX_NEW_TOKENS_LIMIT * MAX_TOKEN_CHARS  # a run's decoded text
MAX_NOTE_CHARS = 4096
MAX_TOP = RECORD_TOP_LIMIT  # record_top, and so every top-k list
MAX_SECONDS = 86_400.0  # any time in a trace: a day
MAX_PAIR_ENTRIES = 32
MAX_PAIR_CHARS = 1024
MAX_NAME_CHARS = 64  # a drafter's name
MAX_CACHE = MAX_PROMPT_IDS + MAX_NEW_TOKENS_LIMIT + GAMMA_LIMIT
PROB_SLACK = 1e-6  # float32 rounding can put a probability a hair above 1


# --- parsing ----------------------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise Refused(f"not a usable trace file: {name} is not a number a trace can hold")


def parse_json(data: str | bytes) -> Any:
    """JSON text -> Python values, refusing what could exhaust memory or time, before it is built where it can be:
    a file over MAX_FILE_BYTES, too many objects or arrays, an object with too many fields, deep nesting, NaN and
    Infinity, integers too long for int() (Python's 4300-digit limit). Every refusal is one Refused."""
    expect(
        len(data) <= MAX_FILE_BYTES,
        f"not a usable trace file: it is over {MAX_FILE_BYTES >> 20} MB, the most a trace may hold",
    )
    arrays = data.count(b"[" if isinstance(data, bytes) else "[")
    expect(
        arrays <= MAX_JSON_ARRAYS,
        f"not a usable trace file: it has {arrays} '[' characters; the limit is {MAX_JSON_ARRAYS}",
    )
    objects = 0

    def count(obj: dict) -> dict:
        nonlocal objects
        objects += 1
        if objects > MAX_JSON_OBJECTS:
            raise Refused(f"not a usable trace file: it has over {MAX_JSON_OBJECTS} objects")
        if len(obj) > MAX_JSON_KEYS:
            raise Refused(f"not a usable trace file: an object has {len(obj)} fields; the limit is {MAX_JSON_KEYS}")
        return obj

    try:
        return json.loads(data, object_hook=count, parse_constant=_no_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Refused(f"not a JSON file ({exc.__class__.__name__}: {str(exc)[:200]})") from None
    except Refused:  # the hooks' own refusals, already worded (a ValueError too: not wrapped again)
        raise
    except ValueError as exc:  # int()'s digit limit, the only other ValueError json.loads raises
        raise Refused(f"not a usable trace file: {str(exc)[:80]}") from None
    except RecursionError:
        raise Refused("not a usable trace file: the JSON is nested too deeply") from None
    except MemoryError:
        raise Refused("not a usable trace file: it is too large to read") from None


def read_file(path: str | Path, error: type[Exception], what: str, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """The JSON of a file anyone may have made, bounded as a trace's is (parse_json), at most max_bytes read; else
    `error` in one line that names the file. `what` names the kind of file in the messages ("a stream file")."""
    try:
        with Path(path).open("rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        size = f"{max_bytes >> 20} MB" if max_bytes >= 2**20 else f"{max_bytes >> 10} kB"
        raise error(f"{path}: over {size}, the most {what} may hold")
    try:
        return parse_json(data)
    except Refused as exc:
        raise error(f"{path}: {str(exc).replace('a usable trace file', what).replace('trace', 'file')}") from None


def read_model(
    path: str | Path,
    model: Any,
    error: type[Exception],
    what: str,
    max_bytes: int = MAX_FILE_BYTES,
    words: dict[str, str] | None = None,
) -> Any:
    """A file anyone may have made, read into `model` (a pydantic model, or any type pydantic reads): bounded JSON
    (read_file), then every field of its type and range; else `error` in one line naming the file and the field
    (errors.refusal, with a reader's own `words`). A missing file is a FileNotFoundError."""
    body = read_file(path, error, what, max_bytes)
    try:
        return TypeAdapter(model).validate_python(body)
    except ValidationError as exc:
        words = {"the file": f"{what} (a JSON object)", **(words or {})}  # a list or a number where the object goes
        raise error(f"{path}: {refusal(exc, model, 'the file', words)}") from None


# --- typed fields -----------------------------------------------------------------------------------------
# pydantic types: each checks one JSON value strictly (a bool is not a number, 5.0 is not an integer), its range and a
# container's length before its items; errors.refusal words the first failure as one line that names the field, at a
# path such as rounds[3].drafted[1].verdict.


class Fields(BaseModel):
    """A JSON object of exactly these fields (those with a default may be left out), each of its type and bounds."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


def Int(lo: int, hi: int) -> Any:
    return Annotated[int, Field(ge=lo, le=hi)]


def Float(lo: float, hi: float) -> Any:  # also refuses inf and nan (1e999 parses to inf)
    return Annotated[float, Field(ge=lo, le=hi)]


def Str(max_chars: int) -> Any:  # strict str also refuses a lone surrogate, which no page, file or message can encode
    return Annotated[str, Field(max_length=max_chars)]


def Many(item: Any, max_len: int, min_len: int = 0, read_as: type = tuple) -> Any:
    """An array of min_len to max_len items. Its length is checked before any item, and the items stop at the first
    bad one: a refusal costs one item's errors, however many more are bad."""
    return Annotated[
        list[item],
        Field(min_length=min_len, max_length=max_len, fail_fast=True),
        GetPydanticSchema(_length_first),
        AfterValidator(read_as),
    ]


def _length_first(source: Any, handler: Any) -> Any:
    items = handler(source)
    length = core_schema.list_schema(min_length=items.get("min_length"), max_length=items.get("max_length"))
    return core_schema.chain_schema([length, items])


def _default(f: Any) -> Any:
    """A dataclass field's default for pydantic: its value, its factory, or required (...)."""
    if f.default_factory is not MISSING:
        return Field(default_factory=f.default_factory)
    return ... if f.default is MISSING else f.default


def Record(cls: type, kinds: dict[str, Any], lenient: bool = False) -> Any:
    """A dataclass: a model of its fields, each of its kind and with the dataclass's default, read into a `cls`. Unknown
    fields are refused unless lenient (then they are dropped, as SpecConfig.from_dict does)."""
    names = {f.name for f in fields(cls)}
    if set(kinds) != names:  # a field added to the dataclass without a rule for reading it
        raise TypeError(f"{cls.__name__}: kinds for {sorted(set(kinds) ^ names)} out of step")
    shape = {f.name: (kinds[f.name], _default(f)) for f in fields(cls)}
    model = create_model(
        cls.__name__, __base__=Fields, __cls_kwargs__={"extra": "ignore" if lenient else "forbid"}, **shape
    )
    return Annotated[model, AfterValidator(lambda checked: cls(**checked.__dict__))]


# --- agreement --------------------------------------------------------------------------------------------
# What every run speculative_generate and autoregressive_generate record satisfies, and nothing more: a file
# that breaks one of these was not recorded, and the views may rely on them (positions, counts, totals).


def check_trace(trace: Trace) -> None:
    vocab = vocab_size(trace.pair)
    for where, ids in _id_lists(trace):
        if ids and max(ids) >= vocab:
            raise Refused(f"{where} holds the id {max(ids)}, outside the vocabulary of {vocab} tokens")
    rounds = trace.rounds
    _check_steps(rounds, "rounds")
    _check_rounds(trace)
    expect(trace.summary.method == "speculative", f"summary.method must be 'speculative', got {trace.summary.method!r}")
    counts = (
        len(rounds),
        sum(len(r.drafted) for r in rounds),
        sum(r.n_accepted for r in rounds),
        sum(r.draft_forwards for r in rounds),
    )
    _check_totals(
        trace.summary,
        "summary",
        trace.config.max_new_tokens,
        counts=counts,
        appended=[t for r in rounds for t in r.appended],
        ends=rounds[-1].elapsed if rounds else 0.0,
    )
    _check_baseline(trace)


def vocab_size(pair: dict[str, str]) -> int:
    """The vocabulary the trace names (pair["vocab_size"], a decimal string), else the hard cap MAX_TOKEN_ID."""
    stated = pair.get("vocab_size")
    if stated is None:
        return MAX_TOKEN_ID
    expect(
        stated.isascii() and stated.isdigit() and len(stated) <= 10 and 0 < int(stated) <= MAX_TOKEN_ID,
        f"pair['vocab_size'] must be a whole number from 1 to {MAX_TOKEN_ID}, got {show(stated)}",
    )
    return int(stated)


def _id_lists(trace: Trace) -> Iterator[tuple[str, Sequence[int]]]:
    yield "prompt_ids", trace.prompt_ids
    for i, r in enumerate(trace.rounds):
        yield f"rounds[{i}].drafted", [d.id for d in r.drafted]
        yield f"rounds[{i}].alternatives", [a.id for a in r.alternatives]
        yield f"rounds[{i}].tree", [t.id for t in r.tree]
        yield f"rounds[{i}].next_token", [r.next_token.id]
        for name in ("top_p", "top_q", "top_residual"):
            yield f"rounds[{i}].{name}", [t.id for t in getattr(r, name)]
        yield f"rounds[{i}].appended", r.appended
    yield "summary.token_ids", trace.summary.token_ids
    yield "baseline", [e.token.id for e in trace.baseline]
    if trace.baseline_summary is not None:
        yield "baseline_summary.token_ids", trace.baseline_summary.token_ids


def _check_steps(steps: Sequence[Any], where: str) -> None:
    """Rounds or baseline tokens: numbered 0, 1, 2, ... and finished in time order."""
    elapsed = 0.0
    for i, step in enumerate(steps):
        expect(step.index == i, f"{where}[{i}].index is {step.index}; they are numbered 0, 1, 2, ...")
        expect(step.elapsed >= elapsed, f"{where}[{i}].elapsed ({step.elapsed:g} s) is before the one ahead of it")
        elapsed = step.elapsed


def _check_rounds(trace: Trace) -> None:
    config, prompt, last = trace.config, len(trace.prompt_ids), len(trace.rounds) - 1
    # Before round 0 a cache holds the prompt but its last token (which goes into the first verify), or nothing
    # when the prompt is fused into round 0; a drafter that keeps no cache has none, and one may lag the target's.
    target = 0 if config.fuse_prompt else prompt - 1
    kind = drafter_class(config.drafter)
    draft = max(0, target - kind.cache_lag) if kind.keeps_cache else 0
    caches = (target, draft)
    position = 0
    for i, r in enumerate(trace.rounds):
        where = f"rounds[{i}]"
        expect(r.position == position, f"{where}.position is {r.position}; the rounds before it appended {position}")
        cut = _check_round(r, trace.config, where)
        expect(not cut or i == last, f"{where}.appended stops at an end of sequence, yet more rounds follow")
        position += len(r.appended)
        _check_caches(r, where, caches, committed=prompt + position, drafter=config.drafter)
        caches = (r.target_cache_after, r.draft_cache_after)


def _check_caches(r: RoundEvent, where: str, before: tuple[int, int], committed: int, drafter: str) -> None:
    """Each round starts from the caches the last one left. After it, the target's cache holds the committed tokens
    but the newest (the next forward feeds it again), or one fewer where a kept alternative replaced the draft it
    had cached, or as many fewer as a kept tree path has nodes; the draft's holds at most as many (none for the
    n-gram drafter, fewer after a plain step)."""
    expect(
        r.target_cache_before == before[0],
        f"{where}.target_cache_before is {r.target_cache_before}; the round before left {before[0]}",
    )
    expect(
        r.draft_cache_before == before[1],
        f"{where}.draft_cache_before is {r.draft_cache_before}; the round before left {before[1]}",
    )
    fewest = committed - 1 - max(1, len(r.tree_path))
    expect(
        fewest <= r.target_cache_after <= committed - 1,
        f"{where}.target_cache_after is {r.target_cache_after}; with {committed} tokens committed it is "
        f"{fewest} to {committed - 1}",
    )
    most = committed - 1 if drafter_class(drafter).keeps_cache else 0
    expect(r.draft_cache_after <= most, f"{where}.draft_cache_after is {r.draft_cache_after}; at most {most} here")


def _check_round(r: RoundEvent, config: Any, where: str) -> bool:
    """The round's parts agree with each other and the settings; True when appended was cut at an end of sequence."""
    n = len(r.drafted)
    expect(
        n <= r.gamma <= max(config.gamma, config.gamma_max),
        f"{where}.gamma is {r.gamma}, with {n} drafted and the settings' gamma {config.gamma}, "
        f"gamma_max {config.gamma_max}",
    )
    expect(
        r.rejection_index is None or r.rejection_index < n,
        f"{where}.rejection_index is {r.rejection_index}, past its {n} drafted tokens",
    )
    rejection = n if r.rejection_index is None else r.rejection_index
    expected = ["accepted"] * rejection + ["rejected"] * (rejection < n) + ["unchecked"] * (n - rejection - 1)
    expect(
        [d.verdict for d in r.drafted] == expected,
        f"{where}.drafted: the verdicts disagree with rejection_index {r.rejection_index}",
    )
    extra, bonus = off_chain(r, config, where)
    expect(
        r.n_accepted == rejection + len(extra),
        f"{where}.n_accepted is {r.n_accepted}; its verdicts give {rejection + len(extra)}",
    )
    expect(
        r.next_source == ("bonus" if bonus else "resampled"),
        f"{where}.next_source is {r.next_source!r}, but the verdicts make the next token a "
        f"{'bonus' if bonus else 'resampled'} one",
    )
    expect(not bonus or not (r.top_q or r.top_residual), f"{where}: a bonus token has no top_q or top_residual")
    for name in ("top_p", "top_q", "top_residual"):
        expect(
            len(getattr(r, name)) <= config.record_top,
            f"{where}.{name} has {len(getattr(r, name))} tokens; the settings' record_top is {config.record_top}",
        )
    _check_source(r, config.drafter, where)
    # One to n passes (lookahead shares a draft model's), one for all n (Medusa's heads), or none (a point mass; a
    # chooser's round that no model drafted).
    kind = drafter_class(config.drafter)
    passes = kind.draft_passes if not kind.sources or model_drafted(config.drafter, r.draft_source) else "none"
    most = {"per token": n, "one": min(n, 1), "none": 0}[passes]
    expect(
        r.draft_forwards == 0 if most == 0 else 1 <= r.draft_forwards <= most,
        f"{where}.draft_forwards is {r.draft_forwards} for {n} tokens drafted by the {config.drafter} drafter",
    )
    _check_draws(r.drafted, config.greedy, f"{where}.drafted")
    _check_draws(r.alternatives, config.greedy, f"{where}.alternatives")
    _check_draws(r.tree, config.greedy, f"{where}.tree")
    full = [d.id for d in r.drafted[:rejection]] + extra + [r.next_token.id]
    expect(
        list(r.appended) == full[: len(r.appended)],
        f"{where}.appended is not the accepted drafts, then any kept alternative or tree path, then next_token",
    )
    return len(r.appended) < len(full)


def _check_source(r: RoundEvent, drafter: str, where: str) -> None:
    """A drafter that chooses names its choice whenever it drafted; the others never name one."""
    kind = drafter_class(drafter)
    allowed = kind.sources
    expect(
        r.draft_source in allowed or (r.draft_source == "" and not (allowed and r.drafted)),
        f"{where}.draft_source is {show(r.draft_source)}, for {len(r.drafted)} tokens drafted by the {drafter} "
        f"drafter (it names {' or '.join(map(repr, allowed)) or 'no source'})",
    )


def _check_draws(tokens: Sequence[Any], greedy: bool, where: str) -> None:
    """Greedy decides by argmax (no draws); sampling draws u for every checked token and keeps it iff u < ratio."""
    for i, d in enumerate(tokens):
        if (d.u is not None) != (not greedy and d.verdict != "unchecked"):
            mode = "greedy" if greedy else "sampling"
            raise Refused(f"{where}[{i}].u is {show(d.u)} for a {d.verdict} token ({mode})")
        if d.u is not None and (d.u < d.ratio) != (d.verdict == "accepted"):
            raise Refused(f"{where}[{i}].verdict is {d.verdict!r}, but u is {d.u} and ratio {d.ratio}")


def _check_baseline(trace: Trace) -> None:
    events, summary = trace.baseline, trace.baseline_summary
    if summary is None:
        expect(not events, "baseline has tokens but there is no baseline_summary")
        return
    expect(
        summary.method == "autoregressive", f"baseline_summary.method must be 'autoregressive', got {summary.method!r}"
    )
    expect(trace.summary.finish_reason != "cancelled", "a cancelled run has no baseline, yet baseline_summary is set")
    _check_steps(events, "baseline")
    _check_totals(
        summary,
        "baseline_summary",
        trace.config.max_new_tokens,
        appended=[e.token.id for e in events],
        counts=(len(events), 0, 0, 0),
        ends=events[-1].elapsed if events else 0.0,
    )


def _check_totals(
    s: RunSummary, where: str, max_new_tokens: int, appended: list[int], counts: tuple[int, int, int, int], ends: float
) -> None:
    """A summary agrees with its events: counts (steps, drafted, accepted, draft forwards), tokens, rates, and
    times (its seconds cover the prefill and every event, the last of which ends at `ends`)."""
    expect(list(s.token_ids) == appended, f"{where}.token_ids are not the tokens its events appended")
    expect(s.new_tokens == len(appended), f"{where}.new_tokens is {s.new_tokens}; its events appended {len(appended)}")
    expect(
        s.new_tokens <= max_new_tokens and (s.finish_reason != "length" or s.new_tokens == max_new_tokens),
        f"{where}: {s.new_tokens} tokens, finish_reason {s.finish_reason!r}, max_new_tokens {max_new_tokens}",
    )
    expect(s.finish_reason != "eos" or s.new_tokens > 0, f"{where}.finish_reason is 'eos' but no token was made")
    expect(
        s.prefill_seconds <= s.seconds and ends <= s.seconds,
        f"{where}.seconds ({s.seconds:g}) ends before its prefill or its last event ({ends:g} s)",
    )
    steps, drafted, accepted, forwards = counts
    for name, total in (("rounds", steps), ("drafted", drafted), ("accepted", accepted), ("draft_forwards", forwards)):
        expect(getattr(s, name) == total, f"{where}.{name} is {getattr(s, name)}; its events add up to {total}")
    rates = (
        ("acceptance_rate", accepted, drafted),
        ("mean_accepted_per_round", accepted, steps),
        ("tokens_per_second", s.new_tokens, s.seconds - s.prefill_seconds),
    )
    for name, numerator, denominator in rates:
        expected = numerator / denominator if denominator > 0 else 0.0
        expect(
            math.isclose(getattr(s, name), expected, rel_tol=1e-6, abs_tol=1e-9),
            f"{where}.{name} is {getattr(s, name):g}; its counts give {expected:g}",
        )
