"""Words and HTML for the Batching page: where a result comes from, what it shows, and why (pure, escaped)."""

from __future__ import annotations

from specviz.decoding.costs import batched_draft_seconds, catch_up_share

from .base import clip, esc, md

EXPLANATION = (
    "**Spare compute.** A verify pass checks γ drafted tokens in one target forward over γ + 1 tokens. It costs "
    "about one plain step only while the hardware has compute to spare: at batch 1, decoding is **memory-bound** "
    "(every step reads all the weights to do a few multiply-adds per weight), and extra tokens in the same forward "
    "ride along almost free.\n\n"
    "**Batching spends the same spare compute.** B requests in one forward also read the weights once for B tokens. "
    "Speculation multiplies that by γ + 1: a verify at batch B is a forward over n = B (γ + 1) tokens. Once n passes "
    "the knee of T(n), the forward is **compute-bound**, its cost grows in proportion to n, and the rejected drafts "
    "are paid in full.\n\n"
    "**Every row keeps what it accepted.** Rows accept different numbers of drafts. Serving engines (vLLM, SGLang, "
    "TensorRT-LLM) let each request keep its own accepted tokens, its own cache length and its own positions, so a "
    "row in a batch of 16 commits as many tokens each round as decoded alone. Here a row's mask hides the cache "
    "slots it rejected. The comparison, where the batch waits for its slowest row (every row keeps only the shortest "
    "accepted prefix), yields less and less as B grows: that is why engines stay ragged.\n\n"
    "**A row's drafts are its own.** The draft here is int8: its activations are quantized with a scale. One scale "
    "for the whole batch would make a row's guesses depend on the other rows; a scale per token, as serving engines' "
    "int8 kernels use, gives every row the guesses it makes alone, so whether the target accepts them does not "
    "depend on which rows share its batch (the table's acceptance still moves a little with B: larger B decode more "
    "prompts, and a row near the end of its budget drafts as far as the batch does).\n\n"
    "**γ by batch size.** In a serving engine, which puts a new request in as soon as one finishes, what ends the "
    "gain is the verify's cost, so engines draft less as the batch grows: vLLM and SGLang set the number of "
    "speculative tokens per batch size, down to 0 (speculation off) for large batches. Here a batch keeps its rows "
    "to the end, so rows that finished early also wait through its last rounds; the reading above says which of "
    "the two ends the gain in this run. "
    "The best γ at each B follows from the batch's own forward times and **a**: "
    "E(a, γ) T(B) / (γ t_draft(B) + T_verify(B, γ)), T_verify the target's forward over B rows of γ + 1 tokens. A "
    "GPU's knee lies at hundreds to thousands of tokens; a CPU's lies much lower.\n\n"
    "**a** here is Leviathan's expected acceptance, estimated as the table's column says: the drafts the target "
    "kept ÷ the drafts it checked. It is not the acceptance rate (accepted ÷ drafted, the serving engines' term), "
    "which is lower: it also counts the drafts thrown away unchecked after a rejection."
)


def source_html(doc: dict, recorded: bool) -> str:
    """One line: recorded (on which machine, at which precision, when) or this session's run, measured on this
    machine now; which pair and settings."""
    badge = "recorded" if recorded else "your run, measured on this machine now"
    return (
        f'<div class="sv-note"><b>{esc(badge)}</b> · {esc(clip(doc["device_name"], 120))} '
        f"({esc(doc['device'])}, {esc(doc['threads'])} threads, {esc(clip(doc.get('dtype', '?'), 20))}) · "
        f"{esc(clip(doc['measured_at'], 40))} · "
        f"{esc(clip(doc['target'], 80))} ← {esc(clip(doc['draft'], 80))} · γ = {esc(doc['gamma'])}, "
        f"{esc(doc['max_new_tokens'])} new tokens per row, temperature {esc(doc['temperature'])}</div>"
    )


PREDICTION_MISS = 0.15  # the issue's tolerance: a prediction further off than this says so
STEADY = 0.10  # tokens per row per round within this of B = 1's: the round does not shrink


def _times(row: dict) -> tuple[float, float]:
    """(a plain step, a verify at the fixed γ): timed at the batch's own shape; a version 2 file: off the curve."""
    if row["ragged"].get("verify_seconds") is None:
        return row["curve_step_seconds"], row["ragged"]["curve_verify_seconds"]
    return row["target_step_seconds"], row["ragged"]["verify_seconds"]


def _yield(entry: dict) -> float:
    """What a round gave each row: per round the batch ran (version 3), or per round of an active row (2)."""
    return entry.get("batch_tokens_per_round") or entry["tokens_per_round"]


def _catch_up(row: dict, gamma: int) -> tuple[float, float]:
    """(the draft's first forward of a round over two tokens per row, timed; the measured a, kept / checked
    drafts, which says how often a round starts with it). Files before version 4: (a step, 0: never)."""
    step, a = row["draft_step_seconds"], row["ragged"].get("acceptance")
    if row.get("draft_catch_up_seconds") is None or a is None:
        return step, 0.0
    return row["draft_catch_up_seconds"], a


def _costs(row: dict, gamma: int) -> dict[str, float]:
    """A round's cost in plain steps of the batch, from the batch's own timings: its verify and its γ draft steps, the
    first one priced by how often it takes two tokens of a row, as the expected speed-up prices it."""
    step, verify = _times(row)
    wide, a = _catch_up(row, gamma)
    draft = batched_draft_seconds(a, gamma, row["batch"], row["draft_step_seconds"], wide) / step
    return {"verify": verify / step, "draft": draft, "round": verify / step + draft}


def _miss(entry: dict) -> str:
    """Where the prediction is off the measurement by more than PREDICTION_MISS, says so."""
    miss = abs(entry["predicted_speedup"] - entry["measured_speedup"]) / entry["measured_speedup"]
    return f"; the prediction is {miss:.0%} off here" if miss > PREDICTION_MISS else ""


def _round(row: dict, gamma: int) -> str:
    n, cost, (step, verify) = row["batch"] * (gamma + 1), _costs(row, gamma), _times(row)
    return (
        f"A round costs {cost['round']:.2f} plain steps of the batch (a verify over {row['batch']} × {gamma + 1} = "
        f"{n} tokens, {verify:.3f} s against a plain step's {step:.3f} s: {cost['verify']:.2f} steps; γ = {gamma} "
        f"draft steps of {row['draft_step_seconds']:.3f} s{_wide_first(row, gamma)}: {cost['draft']:.2f}) and "
        f"gives each row {_yield(row['ragged']):.2f} tokens{_while_decoding(row['ragged'])}."
    )


def _wide_first(row: dict, gamma: int) -> str:
    wide, a = _catch_up(row, gamma)
    share = catch_up_share(a, gamma, row["batch"])
    if not share:
        return ""
    return (
        f", the first one {wide:.3f} s in the {share:.0%} of rounds that follow one where some row accepted all γ "
        "drafts (1 − (1 − a^γ)^B, a the share of checked drafts kept), as it also reads the last of them"
    )


def _while_decoding(ragged: dict) -> str:
    """Where a round the batch ran gives a row less than a round the row itself decoded (the table's column), why."""
    own = ragged["tokens_per_round"]
    if abs(_yield(ragged) - own) < 0.005:
        return ""
    return (
        f" per round the batch ran ({own:.2f} per round while the row was still decoding, the table's tokens / "
        "row / round: a finished row leaves the batch and gains nothing from the rounds the batch still runs for "
        "the others)"
    )


def _why_it_stopped(first: dict, row: dict, gamma: int) -> str:
    """Which of the two factors ended the gain between the first B and this one: the rounds' yield or their cost."""
    was, now = _costs(first, gamma)["round"], _costs(row, gamma)["round"]
    before, after = _yield(first["ragged"]), _yield(row["ragged"])
    change = (
        f"from B = {first['batch']} to B = {row['batch']} a round's cost went from {was:.2f} to {now:.2f} plain "
        f"steps and what it gave each row from {before:.2f} to {after:.2f} tokens"
    )
    if before / after >= now / was:
        return (
            f"**Why:** {change}. The rounds' yield ends the gain here, more than the verify's cost: a batch runs "
            "until its slowest row is done, and rows that finished early gain nothing from its last rounds."
        )
    return f"**Why:** {change}. The verify's cost ends the gain here: n = B (γ + 1) has passed the knee of T(n)."


def _rounds(rows: list[dict]) -> str:
    first, last = rows[0], rows[-1]
    alone = [r["alone"]["tokens_per_round"] if r.get("alone") else first["ragged"]["tokens_per_round"] for r in rows]
    spread = max(abs(r["ragged"]["tokens_per_round"] / a - 1) for r, a in zip(rows, alone, strict=True))
    within = spread <= STEADY
    if last.get("alone"):
        steady = f"within {spread:.0%} at every B" if within else f"up to {spread:.0%} off"
        against = f"against {last['alone']['tokens_per_round']:.2f} for the same rows decoded one at a time ({steady})"
    else:  # a version 2 file: B = 1's own rows are the reference
        against = f"{'within' if within else 'up to'} {spread:.0%} {'of' if within else 'off'} B = {first['batch']}'s"
    return (
        f"- **What a round yields.** Every row keeps what it accepted: {first['ragged']['tokens_per_round']:.2f} "
        f"tokens per row per round at B = {first['batch']}, {last['ragged']['tokens_per_round']:.2f} at "
        f"B = {last['batch']}, {against}. Waiting for the slowest row: {first['min_cut']['tokens_per_round']:.2f} "
        f"at B = {first['batch']}, {last['min_cut']['tokens_per_round']:.2f} at B = {last['batch']}."
    )


def _engine(row: dict) -> str:
    """At B = 1: the batched path against the single-row engine, each repeat's speed-up (their spread is the noise)."""
    single = row.get("single_row_engine")
    if not single:
        return ""
    if not single.get("speedups"):  # a version 2 file: one run each
        return f" The single-row engine on the same prompts: {single['measured_speedup']:.2f}×."

    def listed(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}×" for v in values)

    return (
        f" The single-row engine on the same prompts: {listed(single['speedups'])}; this batched path: "
        f"{listed(single['batched_speedups'])} (one run each, each against its own plain run)."
    )


def _gammas(rows: list[dict]) -> str:
    def named(g: int) -> str:
        return "off" if g == 0 else f"γ = {g}"

    best = ", ".join(f"{named(r['best_gamma'])} at B = {r['batch']}" for r in rows)
    agree = [r["batch"] for r in rows if r["best_gamma"] == r["predicted_best_gamma"]]
    differ = [f"B = {r['batch']} ({named(r['predicted_best_gamma'])})" for r in rows if r["batch"] not in agree]
    said = f"picks the same at B = {', '.join(map(str, agree))}" if agree else "picks none of them"
    tried = ", ".join(str(e["gamma"]) for e in rows[0]["gammas"])
    off = f" (off: none of γ = {tried} beats plain decoding)" if any(r["best_gamma"] == 0 for r in rows) else ""
    return (
        f"- **γ by batch size.** Measured best: {best}{off}. The prediction from the forward times, the draft's "
        f"step and a {said}" + (f"; it picks otherwise at {', '.join(differ)}." if differ else ".")
    )


def _greedy(rows: list[dict], dtype: str) -> str:
    """Whether each B's greedy rows are the text of their prompts decoded alone (the table's last column)."""
    if any(r["greedy_identical"] is None for r in rows):
        return ""
    same = [str(r["batch"]) for r in rows if r["greedy_identical"]]
    other = [str(r["batch"]) for r in rows if not r["greedy_identical"]]
    if not other:
        return "- **Same text.** At every B, every greedy row is the text its prompt gives decoded alone."
    said = f"it is at B = {', '.join(same)}; " if same else ""
    return (
        f"- **Same text.** A greedy row should be the text its prompt gives decoded alone: {said}at "
        f"B = {', '.join(other)} at least one of the runs (plain, a γ, or the batch waiting for its slowest row) "
        "decoded a different text (the table's greedy identical)." + (BF16_TIES if dtype == "bfloat16" else "")
    )


BF16_TIES = (
    " In bfloat16 a forward over several tokens and a one-token step round differently, so where the target's two "
    "best tokens nearly tie, a verify and a plain step can pick different ones. With float32 weights (the sidebar's "
    "precision) every row should match: in this project's float32 run of the recorded batches, every row did."
)


def _runs(doc: dict) -> str:
    """How many runs each speed-up is the median of (version 4), and the spread of B = 1's at the fixed γ."""
    runs, ragged = doc.get("runs", 1), doc["rows"][0]["ragged"]
    if runs < 2 or not ragged.get("speedups"):
        return ""
    spread = ", ".join(f"{s:.2f}×" for s in ragged["speedups"])
    return (
        f"- **Each speed-up is the middle of {runs} runs**, each right after a plain run of the same rows and each "
        f"with its own prediction: the machine's speed drifts from minute to minute (B = {doc['rows'][0]['batch']} at "
        f"γ = {doc['gamma']}, in the order they ran: {spread}; the page shows {ragged['measured_speedup']:.2f}×)."
    )


def reading(doc: dict) -> str:
    """What the result shows, in markdown bullets: the rounds, each B, where it stops paying and why, the γ per B."""
    rows, gamma = doc["rows"], doc["gamma"]
    first, even = rows[0], doc.get("break_even_batch")
    lines = [_rounds(rows), _runs(doc)]
    for row in rows:
        ragged, cut = row["ragged"], row["min_cut"]
        best = max(row["gammas"], key=lambda e: e["measured_speedup"])
        head = f"- **B = {row['batch']}: {ragged['measured_speedup']:.2f}×** at γ = {gamma}"
        line = (
            f"{head} (predicted {ragged['predicted_speedup']:.2f}×{_miss(ragged)}); waiting for the slowest row "
            f"{cut['measured_speedup']:.2f}×; "
            + (
                f"its fastest γ, {best['gamma']}, gives {best['measured_speedup']:.2f}×: below plain decoding, so off "
                "is best (the table's best γ 0)."
                if row["best_gamma"] == 0
                else f"at its best γ = {best['gamma']}, {best['measured_speedup']:.2f}×."
            )
        )
        if row is first:
            line += f" {_round(row, gamma)}{_engine(row)}"
        elif row["batch"] == even:
            line += (
                f" Speculation at γ = {gamma} no longer pays. {_round(row, gamma)} {_why_it_stopped(first, row, gamma)}"
            )
        lines.append(line)
    if even is None:
        lines.append(
            f"- Up to B = {rows[-1]['batch']} it still pays at γ = {gamma}; larger batches are where it stops."
        )
    lines.append(_gammas(rows))
    lines.append(_greedy(rows, doc.get("dtype", "")))
    return "\n".join(line for line in lines if line)


def failed_message(name: str, error: object) -> str:
    return f"{md(name)} is not a usable batching result, so it is not shown: {md(error)}"
