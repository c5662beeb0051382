"""Both KV caches of one round: before it, after the forward passes, after the rollback (DynamicCache.crop)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specviz.drafters import drafter_class, model_drafted
from specviz.traces.trace import RoundEvent

from .base import MAX_CELLS, MAX_CHIPS, VERDICT_CLASS, count, css_class, esc, round_ending, visible

Cell = tuple[object, str]  # (token text, class string built from fixed names)


def cells_html(cells: Sequence[Cell], pending: int = 0) -> str:
    """`pending` "new" cells (the committed tokens this cache had not seen), then the token cells; at most
    MAX_CELLS in all, the rest counted in one cell."""
    shown_pending = min(pending, MAX_CELLS)
    out = ['<span class="sv-cell pending">new</span>'] * shown_pending
    shown = cells[: MAX_CELLS - shown_pending]
    out += [f'<span class="sv-cell {cls}">{esc(visible(text))}</span>' for text, cls in shown]
    hidden = pending + len(cells) - len(out)
    if hidden > 0:
        out.append(f'<span class="sv-cell more">+{hidden:,} more</span>')
    return "".join(out)


def _line(label: str, old: int, pending: int, cells: Sequence[Cell], length: int, note: str = "") -> str:
    old_html = f'<span class="sv-cell old">{old} cached</span>' if old else ""
    # the note on a line of its own, the grid's whole width: beside the length it widened that column until the
    # cells had none left (an end-of-text round's note, at 1024 px)
    note_html = f'<div class="kv-note">{esc(note)}</div>' if note else ""
    return (
        f'<div class="lbl">{label}</div><div class="row">{old_html}{cells_html(cells, pending)}</div>'
        f'<div class="len">{esc(length)} tokens</div>{note_html}'
    )


@dataclass(frozen=True)
class CacheRound:
    """One model's cache in one round: lengths before and after, tokens fed, whether it ran a forward."""

    name: str
    before: int
    after: int
    fed: int
    forwards: bool


def _model_html(event: RoundEvent, committed: int, cache: CacheRound, branches: Sequence = ()) -> str:
    before, fed = cache.before, cache.fed
    verdicts = [css_class(d.verdict, VERDICT_CLASS, "unchecked") for d in event.drafted[:fed]]
    pending = max(0, committed - before) if cache.forwards else 0
    rows = [f'<div class="group">{cache.name}</div>', _line("before <small>round start</small>", before, 0, [], before)]
    filled: list[Cell] = [(d.text, verdicts[i]) for i, d in enumerate(event.drafted[:fed])]
    # Alternatives sit in the verify forward beside the last draft (same position) and are cropped right after it.
    siblings: list[Cell] = [(a.text, f"{css_class(a.verdict, VERDICT_CLASS, 'unchecked')} alt") for a in branches]
    grown = before + pending + fed + len(siblings)
    rows.append(
        _line(
            "after forward <small>cache grows</small>",
            before,
            pending,
            filled + siblings,
            grown,
            ("tree nodes cropped after the pass" if event.tree else "alternatives cropped after the pass")
            if siblings
            else "",
        )
    )
    keep = max(0, cache.after - committed)
    # An accepted end of text ends the run: it stays in the text, but like any newest committed token its entry is
    # not kept (the next pass would feed it); it is not rolled back.
    ended = min(len(event.appended), count(event.n_accepted), fed) if round_ending(event) == "eos" else 0
    kept: list[Cell] = [(d.text, "accepted") for d in event.drafted[: min(max(keep, ended), fed)]]
    dropped: list[Cell] = [
        (d.text, f"{verdicts[i]} dropped") for i, d in enumerate(event.drafted[:fed]) if i >= max(keep, ended)
    ]
    dropped += [(text, f"{cls} dropped") for text, cls in siblings]
    removed = grown - cache.after - max(0, ended - keep)
    note = f"−{removed} rolled back" if removed > 0 else "nothing to roll back"
    if ended > keep:
        note += "; the end of text stays in the text (the run ends, so its entry is not needed)"
    if branches and event.kept_alternative is not None:
        note += "; the kept alternative is fed with the next verify"
    elif branches and event.tree_path:
        note += "; the kept tree path is fed with the next verify"
    rows.append(_line("after rollback <small>crop</small>", before, pending, kept + dropped, cache.after, note))
    return "".join(rows)


def kv_cache_html(event: RoundEvent, prompt_len: int, drafter: str) -> str:
    """Both KV caches: before the round, after the forward passes, after the rollback (DynamicCache.crop).

    With C tokens committed before the round and n drafted: the target's verify fills C + n positions,
    the rollback keeps the committed ones; the draft fed C + n - 1 (its last token was never fed back).
    """
    committed = count(prompt_len) + count(event.position)
    n = len(event.drafted)
    target = CacheRound("Target (p) cache", count(event.target_cache_before), count(event.target_cache_after), n, True)
    # A kept alternative is not in the target's cache yet: it is fed with the next round's verify.
    rows = ['<div class="sv-kv">', _model_html(event, committed, target, event.alternatives or event.tree[:MAX_CHIPS])]
    kind = drafter_class(drafter)
    if kind.needs_draft_model:
        # The draft runs only when it drafts (a chooser's round from traffic feeds it nothing); it never feeds its
        # own last token back.
        ran = model_drafted(drafter, event.draft_source) and n > 0
        draft = CacheRound(
            "Draft (q) cache",
            count(event.draft_cache_before),
            count(event.draft_cache_after),
            max(0, n - 1) if ran else 0,
            ran,
        )
        rows.append(_model_html(event, committed, draft))
    else:
        rows.append(f'<div class="group">Draft: {esc(kind.cache_note)}</div>')
    rows.append("</div>")
    return "".join(rows)
