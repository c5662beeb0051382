"""Self-distillation data from the target's own greedy continuations (Medusa-1's recipe, section 2.3.2).

At decode time the heads read the target's hidden state on text the target itself wrote (greedy: every committed
token is its argmax). Trained on human text instead, head 1 at t must guess a_{t+1} = argmax p(. | x_<=t+1), which
depends on a human's x_{t+1} that h_t cannot know; on the target's own text x_{t+1} = a_t, which h_t decides.

Prompts: chat requests about the standard library's modules (code that every install has and that shares nothing
with assets/prompts.json), so the continuations are the target's answers in its chat style, as the app serves it:
every other one asks about a snippet (continue, explain, use, type it), the others ask for a whole function from a
documented function's signature and the first line of its docstring, as users ask the app for programs. They
are decoded greedily B at a time (left-padded, as decoding/batch.py does), keeping each step's final hidden state.
For one row, with x_0 the prompt's last token and a_i = argmax LM(h_i) the token fed next:

    hidden  h_0 .. h_{n-1}     the states after x_0, x_1 = a_0, .., x_{n-1} = a_{n-2}
    labels  [i, k - 1] = a_{i+k} (head k at i; IGNORE past the row's end)

A row ends at n new tokens or after its first end-of-sequence token. These are heads/train.py's Features, so the
Medusa and EAGLE trainers read them as they read teacher-forced chunks (each row is one chunk).
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from specviz.decoding.batchcache import BatchCache, left_padded
from specviz.drafters.heads_report import COLLECT_DTYPES
from specviz.models.fastpath import native_bfloat16
from specviz.models.loading import encode_text
from specviz.progress import Progress

from .features import IGNORE, Features, TrainSettings

ASKS = (
    "Continue this code from Python's `{name}` module:\n```python\n{snippet}\n```",
    "Explain what this code from Python's `{name}` module does:\n```python\n{snippet}\n```",
    "Write a short usage example for this code from Python's `{name}` module:\n```python\n{snippet}\n```",
    "Rewrite this code from Python's `{name}` module with type hints:\n```python\n{snippet}\n```",
)
PROMPT_RECIPE = 2  # named in the data cache's key (heads/data.py): raise it whenever the prompts change
WRITE = "Write a Python function `{signature}`. {summary}"
SUMMARY_CHARS = (20, 200)  # a docstring's first line shorter than this says too little, a longer one is a paragraph
SNIPPET_LINES = 10  # lines of code per prompt, starting at a def or class
SNIPPET_CHARS = 320
MAX_ROWS = 256  # prompts decoded at once (each row's cache: about 28 KB a token in bfloat16 on the built-in target)


def snippets(path: Path) -> list[str]:
    """Each def or class of the file with the lines after it (up to SNIPPET_LINES, SNIPPET_CHARS)."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"\s*(def|class|async def) ", line)]
    out = []
    for start in starts:
        block = "\n".join(lines[start : start + SNIPPET_LINES]).strip("\n")
        if len(block) > 80:
            out.append(block[:SNIPPET_CHARS])
    return out


def writing_tasks(path: Path) -> list[str]:
    """A request to write each public top-level function of the file that has a docstring: its signature and the
    docstring's first line (a file that does not parse gives none)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
            continue
        lines = (ast.get_docstring(node) or "").strip().splitlines()
        summary = lines[0].strip() if lines else ""
        if SUMMARY_CHARS[0] <= len(summary) <= SUMMARY_CHARS[1]:
            out.append(WRITE.format(signature=f"{node.name}({ast.unparse(node.args)})", summary=summary))
    return out


def training_prompts(tokenizer: Any, files: list[Path], count: int, seed: int) -> list[list[int]]:
    """`count` prompts, alternately a request about a snippet (a seeded draw of (file, snippet), each asked one of
    ASKS in turn) and a request to write a function (a seeded draw of writing_tasks), while both last."""
    pool = [(path.stem, snippet) for path in files for snippet in snippets(path)]
    tasks = [task for path in files for task in writing_tasks(path)]
    random.Random(seed).shuffle(pool)
    random.Random(seed + 1).shuffle(tasks)
    asks = [ASKS[i % len(ASKS)].format(name=name, snippet=snippet) for i, (name, snippet) in enumerate(pool)]
    mixed = [prompt for pair in zip(asks, tasks, strict=False) for prompt in pair]
    mixed += asks[len(tasks) :] + tasks[len(asks) :]
    return [encode_text(tokenizer, prompt) for prompt in mixed[:count]]


@torch.inference_mode()
def greedy_rows(
    model: Any,
    prompts: list[list[int]],
    new_tokens: int,
    stop_ids: frozenset[int],
    on_step: Callable[[int, int], None] | None = None,
) -> list[tuple[list[int], torch.Tensor, list[int]]]:
    """One batch: per row (fed ids x_0.., hidden [n, H], guesses a_0..), the row cut after its first stop id.
    on_step(step, tokens written so far) is called after every step (a progress bar; it may raise to stop)."""
    lm_head = model.get_output_embeddings()
    ids, pads = left_padded(prompts)
    target = BatchCache(model, model.config.get_text_config().vocab_size, pads)
    if ids.shape[1] > 1:
        target.feed_states(ids[:, :-1])
    fed = ids[:, -1:]
    rows = [([], [], []) for _ in prompts]  # fed, hidden, guesses
    active = list(range(len(prompts)))
    for step in range(new_tokens):
        states = target.feed_states(fed)[:, -1]
        guesses = lm_head(states).argmax(-1)
        still = []
        for j, r in enumerate(active):
            rows[r][0].append(int(fed[j, 0]))
            rows[r][1].append(states[j].float().cpu())
            rows[r][2].append(int(guesses[j]))
            if int(guesses[j]) not in stop_ids:
                still.append(j)
        if len(still) < len(active):  # finished rows leave the batch (their cache rows are dropped)
            target.keep_rows(still)
            active, guesses = [active[j] for j in still], guesses[torch.tensor(still, device=guesses.device)]
        if on_step is not None:
            on_step(step + 1, sum(len(row[0]) for row in rows))
        if not active:
            break
        fed = guesses[:, None].cpu()
    return [(f, torch.stack(h), g) for f, h, g in rows]


def to_features(rows: list[tuple[list[int], torch.Tensor, list[int]]], heads: int) -> Features:
    """Rows of greedy_rows -> Features (heads/train.py): one chunk per row, labels [i, k - 1] = a_{i+k}."""
    labels = []
    for fed, _, guesses in rows:
        n = len(fed)
        shifted = torch.full((n, heads), IGNORE, dtype=torch.long)
        for k in range(1, min(heads, n - 1) + 1):  # head k at i: a_{i+k}
            shifted[: n - k, k - 1] = torch.tensor(guesses[k:], dtype=torch.long)
        labels.append(shifted)
    ids = [token for fed, _, _ in rows for token in fed]
    return Features(
        torch.cat([h for _, h, _ in rows]), torch.cat(labels), torch.tensor(ids), tuple(len(f) for f, _, _ in rows)
    )


DTYPES = {name: getattr(torch, name) for name in COLLECT_DTYPES}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def collection_dtype(model: Any, settings: TrainSettings) -> torch.dtype:
    """The precision the greedy answers are decoded in. "auto": bfloat16 for a float32 target where bfloat16 runs
    natively (faster, with nearly the same argmax: docs/DESIGN.md, "Draft heads: Medusa and EAGLE"), else the
    target's own. Teacher-forced text is always read by the target itself."""
    if settings.data != "greedy":
        return model.dtype
    if settings.collect_dtype != "auto":
        return DTYPES[settings.collect_dtype]
    return torch.bfloat16 if model.dtype == torch.float32 and native_bfloat16(model.device) else model.dtype


@torch.inference_mode()
def teacher_forced(model: Any, ids: list[int], last: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward over ids without a cache: model's final hidden states and their argmax (a_t, its guess for
    x_{t+1}), at every position or at the `last` ones only (the LM head runs on those alone)."""
    states = model.base_model(input_ids=torch.tensor([ids], device=model.device), use_cache=False).last_hidden_state[0]
    states = states if last is None else states[-last:]
    return states, model.get_output_embeddings()(states).argmax(-1)


def reread(model: Any, prompt: list[int], row: tuple[list[int], torch.Tensor, list[int]]) -> tuple:
    """A row as `model` itself reads it: one teacher-forced pass over the prompt and the row's fed tokens (the
    prompt ends with the first of them) gives model's own final hidden states and argmax guesses there."""
    fed = row[0]
    states, guesses = teacher_forced(model, prompt + fed[1:], last=len(fed))
    return fed, states.float().cpu(), guesses.tolist()


def greedy_features(
    model: Any,
    prompts: list[list[int]],
    heads: int,
    tokens: int,
    new_tokens: int,
    batch: int,
    stop_ids: frozenset[int],
    progress: Progress,
) -> Features:
    """Features of the target's greedy continuations of the prompts, in order, until `tokens` positions are
    collected (or the prompts run out)."""
    return greedy_split(model, [prompts, []], heads, (tokens, 0), new_tokens, batch, stop_ids, progress)[0]


def greedy_split(
    model: Any,
    prompt_lists: list[list[list[int]]],
    heads: int,
    budgets: tuple[int, ...],
    new_tokens: int,
    batch: int,
    stop_ids: frozenset[int],
    progress: Progress,
    reader: Any | None = None,
) -> list[Features | None]:
    """Features of each prompt list's greedy continuations, until each has its budget of positions (or 95% of
    it). The lists share batches (a batch costs about the same whichever rows it holds): each batch takes from
    every list the rows it still needs, assuming rows fill 80% of new_tokens, and half as many again. With a
    reader (the target, when `model` is a lower-precision copy of it), the rows of every list but the first
    (the held-out answers) are re-read by it, so they hold the target's own states and guesses."""
    queues = [list(prompts) for prompts in prompt_lists]
    got: list[list] = [[] for _ in prompt_lists]
    total = max(1, sum(budgets))
    while True:
        have = [sum(len(r[0]) for r in rows) for rows in got]
        # within 5% of a budget is enough: another batch for the last few rows would cost minutes
        missing = [0 if h >= 0.95 * b else b - h for b, h in zip(budgets, have, strict=True)]
        wanted = [min(len(q), -(-m * 5 // (4 * new_tokens))) if m else 0 for q, m in zip(queues, missing, strict=True)]
        if not any(wanted):
            break
        take = _shares(wanted, [len(q) for q in queues], batch)
        group = [(i, queues[i].pop(0)) for i, n in enumerate(take) for _ in range(n)]
        done = total - sum(missing)

        def step(k: int, written: int, done: int = done, width: int = len(group)) -> None:
            share = min(1.0, (done + written) / total)
            progress(f"greedy answers to {width} prompts at once, step {k}/{new_tokens}", share)

        for (i, prompt), row in zip(
            group, greedy_rows(model, [p for _, p in group], new_tokens, stop_ids, step), strict=True
        ):
            if reader is not None and i > 0:
                written = sum(len(r[0]) for rows in got for r in rows)
                progress(f"the target re-reads a held-out answer ({len(row[0])} tokens)", min(1.0, written / total))
                row = reread(reader, prompt, row)
            got[i].append(row)
    progress("greedy continuations done", 1.0)
    return [to_features(rows, heads) if rows else None for rows in got]


def _shares(wanted: list[int], available: list[int], batch: int) -> list[int]:
    """Rows per list for one batch: what each wants, scaled in proportion to half as many again (rows that end
    early would otherwise need a second batch, which costs minutes; a row more costs little once the batch runs),
    at most `batch` rows and what each list has left (every list that wants rows gets at least one)."""
    size = min(batch, -(-3 * sum(wanted) // 2))
    shares = [min(a, max(1 if w else 0, w * size // sum(wanted))) for w, a in zip(wanted, available, strict=True)]
    while sum(shares) > size:
        shares[shares.index(max(shares))] -= 1
    for i in sorted(range(len(shares)), key=lambda i: -wanted[i]):  # rounding leftovers to the neediest list
        if wanted[i]:
            shares[i] += min(available[i] - shares[i], size - sum(shares))
    return shares
