"""How much one visitor's run may take on an exposed server (one that listens beyond this machine's loopback).

Every run holds the one device lock while it computes, so one visitor's long job makes everyone else wait. On an
exposed server each long job is bounded before it starts, and the page states the bound beside its button: a batch
by its largest batch's rows x (prompt + new tokens) (its memory) and by the rows x tokens all its runs decode (its
time: it decodes every batch size several times, and the forward passes one after the other, as many at B = 1 as at
B = 64), the Acceptance lab's batch by runs x new tokens, the Learning
page's stream by requests, a training by tokens x epochs. A run beyond its bound is refused with one line and never
takes the lock. Between runs the device goes to visitors in turns (runs.DeviceLock), so queueing run after run gets
one visitor no more than one run per turn. On a loopback address (one person's machine) nothing is bounded.
ui/server.py decides whether the server is exposed; these are plain numbers and words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BATCH_TOKENS = 8_192  # rows x (longest prompt + new tokens) of the largest batch: B = 16 at 512 tokens a row
BATCH_WORK = 65_536  # rows x tokens over every decode of a Batching run: that largest batch decoded 8 times
BATCH_PASSES = 8_192  # forward passes of a Batching run, every draft rejected: small batches are bound by these
LAB_TOKENS = 4_096  # runs x max new tokens of an Acceptance lab batch: 64 runs of 64 tokens, 4 of 1,024
STREAM_REQUESTS = 8  # requests in one Learning run (each runs four times: the target alone and three drafters)
TRAINING_TOKEN_EPOCHS = 256_000  # training tokens x epochs: the default EAGLE training (16,000 x 16)


@dataclass(frozen=True)
class Budget:
    """A bound on one run: `what` names the unit ("rows x tokens"), `limit` the most one run may take."""

    what: str
    limit: int

    def refusal(self, asked: int, detail: str) -> str | None:
        """None within the bound, else the one line that refuses the run (`detail` shows how `asked` was counted)."""
        if asked <= self.limit:
            return None
        counted = f"{detail} = {asked:,} {self.what}" if detail != f"{asked} {self.what}" else detail
        return (
            f"This run would take {counted}; this shared server allows {self.limit:,} per run. "
            "Make it smaller and run again."
        )


BATCH = Budget("rows x tokens", BATCH_TOKENS)
BATCH_DECODED = Budget("rows x tokens decoded", BATCH_WORK)
BATCH_STEPS = Budget("forward passes", BATCH_PASSES)
LAB = Budget("runs x new tokens", LAB_TOKENS)
STREAM = Budget("requests", STREAM_REQUESTS)
TRAINING = Budget("tokens x epochs", TRAINING_TOKEN_EPOCHS)


def batch_refusal(largest_batch: int, prompt_tokens: Sequence[int], new_tokens: int) -> str | None:
    """The largest batch: its rows, each padded to the longest prompt (rows cycle through the prompts), plus the new
    tokens: what its caches hold at the end."""
    longest = max(prompt_tokens)
    detail = f"{largest_batch} rows x ({longest} prompt + {new_tokens} new tokens)"
    return BATCH.refusal(largest_batch * (longest + new_tokens), detail)


def batch_work_refusal(
    rows_decoded: Sequence[int], prompt_tokens: Sequence[int], new_tokens: int, runs: int
) -> str | None:
    """Every batch size of the run: the rows it decodes (`rows_decoded`, one entry per size), each `runs` times
    (plain, speculative at each draft length, ...), each row padded to the longest prompt, plus the new tokens."""
    rows, longest = sum(rows_decoded), max(prompt_tokens)
    detail = f"{rows:,} rows over its batch sizes x ({longest} prompt + {new_tokens} new tokens) x {runs} runs each"
    return BATCH_DECODED.refusal(rows * (longest + new_tokens) * runs, detail)


def batch_passes_refusal(
    batches_per_size: Sequence[int],
    new_tokens: int,
    passes_per_token: int,
    single_rows: int = 0,
    single_passes: int = 0,
) -> str | None:
    """The forward passes one after the other, at most: each batch of each size, `passes_per_token` per new token
    (one plain, and per speculative run gamma draft passes and a verify, as if every draft were rejected), plus
    `single_rows` prompts decoded alone (the reference each batch is compared with, the single-row engine at B = 1),
    `single_passes` per new token each. At small batch sizes a pass costs about the same whatever its rows, so
    these, not the rows, are the run's time."""
    batches = sum(batches_per_size)
    detail = f"{batches} batches x {new_tokens} new tokens x {passes_per_token} passes per token"
    if single_rows:
        detail += f" + {single_rows} prompts alone x {new_tokens} new tokens x {single_passes} passes per token"
    asked = (batches * passes_per_token + single_rows * single_passes) * new_tokens
    return BATCH_STEPS.refusal(asked, detail)


def lab_refusal(runs: int, new_tokens: int) -> str | None:
    return LAB.refusal(runs * new_tokens, f"{runs} runs x {new_tokens} new tokens")


def stream_refusal(requests: int) -> str | None:
    return STREAM.refusal(requests, f"{requests} {'request' if requests == 1 else 'requests'}")


def training_refusal(tokens: int, epochs: int) -> str | None:
    return TRAINING.refusal(tokens * epochs, f"{tokens:,} tokens x {epochs} epochs")


def stated(budget: Budget) -> str:
    """The bound as a page states it before the run: 'at most 8,192 rows x tokens per run'."""
    return f"at most {budget.limit:,} {budget.what} per run"
