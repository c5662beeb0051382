"""The benchmark's table: one row per category and one overall, then what each column means."""

from __future__ import annotations

from typing import Any

from .methods import HF_DEFAULTS

SHORT = {"baseline": "base", "speculative": "ours", "hf_assisted": "hf", "hf_matched": "hf=", "hf_plain": "hf-ar"}
THEORY_COLUMNS = ["ours/hf", "ours/hf=", "a", "acc/rnd", "alt/rnd", "g", "fwd/d", "c", "pred", "eff", "same"]


def _f(value: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**30:.2f} GiB"


def _row(name: str, s: dict[str, Any], methods: list[str]) -> list[str]:
    row = [name, str(s["prompts"])]
    row += [_f(s["tokens_per_second"].get(m)) for m in methods]
    row += [_f(s["speedup"].get(m), suffix="x") for m in methods if m != "baseline"]
    row += [
        _f(s["ratio_to_hf"].get("hf_assisted")),
        _f(s["ratio_to_hf"].get("hf_matched")),
        _f(s.get("acceptance_rate")),
        _f(s.get("mean_accepted_per_round")),
        _f(s.get("alternatives_kept_per_round")),
        _f(s.get("mean_gamma"), ".1f"),
        _f(s.get("draft_forwards_per_drafted")),
        _f(s.get("cost_ratio_c"), ".3f"),
        _f(s.get("predicted_speedup"), suffix="x"),
        _f(s.get("efficiency")),
        {True: "yes", False: "NO", None: "-"}[s.get("identical")],
    ]
    return row


def _grid(head: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell (the first left-aligned), a rule under the head and above the last row."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    rule = line(["-" * w for w in widths])
    return [line(head), rule] + [line(r) for r in rows[:-1]] + [rule, line(rows[-1])]


def _paired_line(paired: dict[str, dict | None]) -> str:
    parts = [
        f"{'over' if m == 'baseline' else 'to'} {SHORT[m]} {v['geo_mean']:.2f}"
        + (f" [{v['low']:.2f}, {v['high']:.2f}]" if v["low"] is not None else "")
        for m, v in paired.items()
        if v is not None
    ]
    if not parts:
        return "ours prompt by prompt: -"
    n = max(v["prompts"] for v in paired.values() if v is not None)
    return f"ours prompt by prompt (geometric mean of the {n} prompts' ratios, 95% interval): " + ", ".join(parts)


def _notes(doc: dict[str, Any]) -> list[str]:
    settings, o = doc["settings"], doc["overall"]
    mem = ", ".join(
        f"{SHORT[m]} {_gib(v['peak_rss_bytes'])}"
        + (f" (GPU {_gib(v['peak_gpu_bytes'])})" if v.get("peak_gpu_bytes") else "")
        for m, v in o["memory"].items()
    )
    per = "" if settings["memory_per_method"] else " (process-wide: this OS cannot reset the peak)"
    bookkeeping = 100 * o["bookkeeping_share"] if "bookkeeping_share" in o else None
    return [
        "",
        "t/s: new tokens per second after the target's prompt pass (same for every method); x: speed-up over base.",
        "base = the target alone (ours), ours = our speculative decoding, hf = transformers' assisted generation "
        f"with its defaults ({HF_DEFAULTS['num_assistant_tokens']} tokens, confidence "
        f"{HF_DEFAULTS['assistant_confidence_threshold']}), hf= = the same with our settings "
        f"({settings['hf_matched']['num_assistant_tokens']} tokens, confidence "
        f"{settings['hf_matched']['assistant_confidence_threshold']}), hf-ar = target.generate() alone.",
        "a = accepted / checked drafted tokens; acc/rnd = accepted per round; alt/rnd = alternatives kept per "
        f"round (ours, {settings['config'].get('alternatives', 0)} other candidates verified with the draft's "
        "last token when the draft is unsure of it; not in a, acc/rnd or pred); g = mean drafted per round; "
        f"fwd/d = draft forwards per drafted token (ours, lookahead {settings['config'].get('lookahead', 0)}: "
        "prompt-lookup guesses scored in one draft forward; transformers drafts one token per forward); "
        "c = draft step / target step; pred = E(a,g) t_target / (g t_draft + t_verify(g)) from the measured curve; "
        "eff = measured ours x / pred.",
        _paired_line(o.get("paired") or {}),
        "end-to-end (prompt pass included) speed-up: "
        + ", ".join(f"{SHORT[m]} {_f(v, suffix='x')}" for m, v in o["e2e_speedup"].items() if m != "baseline"),
        f"bookkeeping for the trace: {_f(bookkeeping, '.2f')}% of our speculative runs' time; "
        f"Leviathan's prediction with a free verify: {_f(o.get('leviathan_speedup'), suffix='x')}",
        f"peak resident memory per method{per}: {mem}",
        f"peak resident memory of the whole process, loading the pair included (VmHWM): "
        f"{_gib(doc.get('process_peak_rss_bytes'))}",
    ]


def format_table(doc: dict[str, Any]) -> str:
    methods = doc["settings"]["methods"]
    head = (
        ["category", "n"]
        + [f"{SHORT[m]} t/s" for m in methods]
        + [f"{SHORT[m]} x" for m in methods if m != "baseline"]
        + THEORY_COLUMNS
    )
    groups = list(doc["categories"].items()) + [("overall", doc["overall"])]
    return "\n".join(_grid(head, [_row(name, s, methods) for name, s in groups]) + _notes(doc))
