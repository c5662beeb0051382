"""Words and HTML for the Batching page: where a result comes from, what it shows, and why (pure, escaped)."""

from __future__ import annotations

from .base import clip, esc, md

EXPLANATION = (
    "**Spare compute.** A verify pass checks γ drafted tokens in one target forward over γ + 1 tokens. It costs "
    "about one plain step only while the hardware has compute to spare: at batch 1, decoding is **memory-bound** "
    "(every step reads all the weights to do a few multiply-adds per weight), and extra tokens in the same forward "
    "ride along almost free.\n\n"
    "**Batching spends the same spare compute.** B requests in one forward also read the weights once for B tokens. "
    "Speculation multiplies that by γ + 1: a verify at batch B is a forward over n = B (γ + 1) tokens. Once n passes "
    "the knee of T(n), the forward is **compute-bound**, its cost grows in proportion to n, and the rejected drafts "
    "are paid in full. The round length shrinks too: the batch advances by the shortest accepted prefix, m + 1.\n\n"
    "**What serving engines do.** They lower γ as the load grows and switch speculation off beyond a critical batch "
    "size: vLLM's guidance drops the draft length to 1 and then to 0 when batches are large, and SpecDecode-Bench "
    "(arXiv 2601.11580) measures the speed-up shrinking from batch 1 to 128. A GPU's knee lies at hundreds to "
    "thousands of tokens; this CPU's lies much lower."
)


def source_html(doc: dict, recorded: bool) -> str:
    """One line: recorded or this session's run, where, when, which pair and settings."""
    badge = "recorded" if recorded else "your run"
    return (
        f'<div class="sv-note"><b>{esc(badge)}</b> · {esc(clip(doc["device_name"], 120))} '
        f"({esc(doc['device'])}, {esc(doc['threads'])} threads) · {esc(clip(doc['measured_at'], 40))} · "
        f"{esc(clip(doc['target'], 80))} ← {esc(clip(doc['draft'], 80))} · γ = {esc(doc['gamma'])}, "
        f"{esc(doc['max_new_tokens'])} new tokens per row, temperature {esc(doc['temperature'])}</div>"
    )


def reading(doc: dict) -> str:
    """What the result shows, in markdown: the break-even and its reason read off T(n)."""
    rows, gamma = doc["rows"], doc["gamma"]
    first = rows[0]
    lines = [
        f"At B = {first['batch']} speculation runs at **{first['measured_speedup']:.2f}×** "
        f"(predicted {first['predicted_speedup']:.2f}×): a verify over {first['batch'] * (gamma + 1)} tokens costs "
        f"{first['curve_verify_seconds'] / first['curve_step_seconds']:.2f} plain steps and a round yields "
        f"{first['tokens_per_round']:.2f} tokens per row."
    ]
    even = doc.get("break_even_batch")
    if even is None:
        lines.append(f"Up to B = {rows[-1]['batch']} it still pays here; larger batches are where it stops.")
        return " ".join(lines)
    row = next(r for r in rows if r["batch"] == even)
    if row is first:
        lines = []  # the sentence below says it of the first batch size
    lines.append(
        f"At **B = {even}** it no longer pays (**{row['measured_speedup']:.2f}×**): the verify is a forward over "
        f"n = {even * (gamma + 1)} tokens, which costs **{row['curve_verify_seconds'] / row['curve_step_seconds']:.2f}"
        f"** plain steps of the batch (T({even * (gamma + 1)}) = {row['curve_verify_seconds']:.3f} s against "
        f"T({even}) = {row['curve_step_seconds']:.3f} s), while the round yields only "
        f"{row['tokens_per_round']:.2f} tokens per row, plus γ = {gamma} draft steps of "
        f"{row['draft_step_seconds']:.3f} s."
    )
    return " ".join(lines)


def failed_message(name: str, error: object) -> str:
    return f"{md(name)} is not a usable batching result, so it is not shown: {md(error)}"
