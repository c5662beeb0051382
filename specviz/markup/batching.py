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


BARELY_PAYS = 1.05  # a measured speed-up below this, though above 1, is called breaking even
PREDICTION_MISS = 0.15  # the tolerance: a prediction further off than this says so


def _costs(row: dict, gamma: int) -> dict[str, float]:
    """A round's cost in plain steps of the batch, read off the curve: its verify and its γ draft steps."""
    verify = row["curve_verify_seconds"] / row["curve_step_seconds"]
    draft = gamma * row["draft_step_seconds"] / row["curve_step_seconds"]
    return {"verify": verify, "draft": draft, "round": verify + draft}


def _predicted(row: dict) -> str:
    """Both predictions; where the curve's is off the measurement by more than PREDICTION_MISS, says so and why."""
    curve, own, measured = row["predicted_speedup"], row["predicted_speedup_batch_shapes"], row["measured_speedup"]
    miss = abs(curve - measured) / measured
    note = (
        f"; the curve's is {miss:.0%} off here: it times one row of n tokens, the batch runs {row['batch']} rows"
        if miss > PREDICTION_MISS
        else ""
    )
    return f"predicted {curve:.2f}× from the curve T(n), {own:.2f}× from this batch's own timed passes{note}"


def _round(row: dict, gamma: int) -> str:
    n, cost = row["batch"] * (gamma + 1), _costs(row, gamma)
    return (
        f"A round costs {cost['round']:.2f} plain steps of the batch (a verify over n = {n} tokens, T({n}) = "
        f"{row['curve_verify_seconds']:.3f} s against T({row['batch']}) = {row['curve_step_seconds']:.3f} s: "
        f"{cost['verify']:.2f} steps; γ = {gamma} draft steps of {row['draft_step_seconds']:.3f} s: "
        f"{cost['draft']:.2f}) and yields {row['tokens_per_round']:.2f} tokens per row."
    )


def _why_it_stopped(first: dict, row: dict, gamma: int) -> str:
    """Which of the two factors ended the gain between the first B and this one: the rounds' yield or their cost."""
    was, now = _costs(first, gamma)["round"], _costs(row, gamma)["round"]
    change = (
        f"from B = {first['batch']} to B = {row['batch']} a round's cost went from {was:.2f} to {now:.2f} plain "
        f"steps and its yield from {first['tokens_per_round']:.2f} to {row['tokens_per_round']:.2f} tokens per row"
    )
    if first["tokens_per_round"] / row["tokens_per_round"] >= now / was:
        return (
            f"**Why:** {change}. The shorter rounds end the gain here, more than the verify's cost: the batch "
            f"advances by the shortest accepted prefix of its {row['batch']} rows (m + 1)."
        )
    return f"**Why:** {change}. The verify's cost ends the gain here: n = B (γ + 1) has passed the knee of T(n)."


def reading(doc: dict) -> str:
    """What the result shows, in markdown bullets: the first B, where it stops paying and why, the last B."""
    rows, gamma = doc["rows"], doc["gamma"]
    first, even = rows[0], doc.get("break_even_batch")
    stop = next((r for r in rows if r["batch"] == even), None)
    lines = []
    for row in rows:
        head = f"- **B = {row['batch']}: {row['measured_speedup']:.2f}×**"
        if row is stop:
            why = "" if row is first else f" {_why_it_stopped(first, row, gamma)}"
            lines.append(f"{head}, speculation no longer pays ({_predicted(row)}). {_round(row, gamma)}{why}")
        elif row is first:
            lines.append(f"{head} ({_predicted(row)}). {_round(row, gamma)}")
        elif row is rows[-1] and stop is not None:
            verify = _costs(row, gamma)["verify"]
            knee = ": past the knee of T(n) the forward is compute-bound" if verify >= 2 else ""
            lines.append(
                f"{head}. A verify over n = {row['batch'] * (gamma + 1)} tokens costs {verify:.2f} plain steps{knee}."
            )
        elif stop is None or rows.index(row) < rows.index(stop):
            if row["measured_speedup"] < BARELY_PAYS:
                lines.append(f"{head}: it only breaks even.")
    if stop is None:
        lines.append(f"- Up to B = {rows[-1]['batch']} it still pays here; larger batches are where it stops.")
    return "\n".join(lines)


def failed_message(name: str, error: object) -> str:
    return f"{md(name)} is not a usable batching result, so it is not shown: {md(error)}"
