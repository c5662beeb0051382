"""Training Medusa heads by self-distillation: the target labels text with its own argmax, the heads learn it.

Data (settings.data): by default the target's own greedy answers to prompts about local Python source
(heads/greedy.py), or one teacher-forced pass over that source itself ("text"), in chunks. Either way, at position
t the target gives h_t (its final hidden state) and a_t = argmax p(. | x_<=t), its guess for x_{t+1}; head k at t
is trained to say a_{t+k}, the target's guess for x_{t+k+1}. Loss (Medusa-1): sum_k 0.8^k CE(head_k(h_t),
a_{t+k}). The source files (the standard library's own, which share nothing with assets/prompts.json) are split
into a training and a held-out set before anything is read; accuracy is measured on the held-out files only.
"""

from __future__ import annotations

import random
import sysconfig
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from specviz.drafters import MEDUSA
from specviz.drafters.heads_report import MAX_CURVE
from specviz.drafters.medusa_heads import MEDUSA_DECAY, MedusaHeads
from specviz.errors import UserError
from specviz.models.fastpath import low_precision_copy, native_bfloat16, prepack_linears
from specviz.progress import Progress

from .data import data_key, data_path, load_data, save_data
from .features import IGNORE, Features, TrainSettings
from .greedy import collection_dtype, dtype_name, greedy_split, teacher_forced, training_prompts

COLLECT_BATCH_HINT = 256  # rows oneDNN packs the collector's weights for: fast from one step's 64 rows to a prompt pass


@dataclass(frozen=True)
class TrainStep:
    """One optimiser step, for the live curve."""

    step: int
    epoch: int
    loss: float
    top1: tuple[float, ...]  # per head, on this batch


def loss_curve(steps: list[TrainStep]) -> list[dict]:
    """The report's loss curve: every step, or for a long training every k-th step back from the last, at most
    MAX_CURVE points (a longer curve would make the report, and so the saved heads, refused when read back)."""
    every = -(-len(steps) // MAX_CURVE) or 1
    kept = steps[::-1][::every][::-1]
    return [{"step": s.step, "epoch": s.epoch, "loss": round(s.loss, 4)} for s in kept]


@dataclass
class TrainReport:
    heads: int
    train_tokens: int
    heldout_tokens: int
    vocabulary: int  # the reduced output vocabulary
    collect_seconds: float
    train_seconds: float
    top1: list[float]  # per head, on the held-out files
    top5: list[float]
    curve: list[dict] = field(default_factory=list)
    where: str = ""  # the pair, device and date it was measured on
    kind: str = MEDUSA  # or EAGLE
    data: str = "greedy"  # settings.data: what the features were collected from
    collect_dtype: str = "float32"  # the precision the greedy answers were decoded in (greedy.collection_dtype)

    def to_dict(self) -> dict:
        return asdict(self)


def source_files(root: Path | None = None) -> list[Path]:
    """The standard library's top-level modules: code and docstrings that every Python install has."""
    folder = root or Path(sysconfig.get_paths()["stdlib"])
    return sorted(path for path in folder.glob("*.py") if path.stat().st_size > 2_000)


def split_files(files: list[Path], seed: int) -> tuple[list[Path], list[Path]]:
    """A seeded shuffle, then every fifth file held out."""
    shuffled = list(files)
    random.Random(seed).shuffle(shuffled)
    return [f for i, f in enumerate(shuffled) if i % 5], [f for i, f in enumerate(shuffled) if not i % 5]


def token_chunks(tokenizer: Any, files: list[Path], tokens: int, chunk: int) -> list[list[int]]:
    """Up to `tokens` tokens of the files, as chunks of `chunk` tokens (a file's tail shorter than 16 is dropped)."""
    chunks: list[list[int]] = []
    total = 0
    for path in files:
        ids = tokenizer(path.read_text(encoding="utf-8", errors="replace"))["input_ids"]
        for start in range(0, len(ids), chunk):
            piece = ids[start : start + min(chunk, tokens - total)]
            if len(piece) >= 16:
                chunks.append(piece)
                total += len(piece)
            if total >= tokens:
                return chunks
    return chunks


@torch.inference_mode()
def collect(model: Any, chunks: list[list[int]], count: int, progress: Progress) -> Features:
    """Teacher-forced target passes: final hidden states and the labels of each head (see the module docstring)."""
    hidden, labels, flat = [], [], []
    for i, ids in enumerate(chunks):
        progress(f"target pass {i + 1}/{len(chunks)}", i / max(1, len(chunks)))
        states, guesses = teacher_forced(model, ids)
        guesses = guesses.cpu()
        shifted = torch.full((len(ids), count), IGNORE, dtype=torch.long)
        for k in range(1, count + 1):  # head k at t: a_{t+k}
            shifted[: len(ids) - k, k - 1] = guesses[k:]
        hidden.append(states.float().cpu())
        labels.append(shifted)
        flat.extend(ids)
    progress("target passes done", 1.0)
    return Features(torch.cat(hidden), torch.cat(labels), torch.tensor(flat), tuple(len(ids) for ids in chunks))


@torch.inference_mode()
def lm_head_rows(model: Any, token_ids: torch.Tensor) -> torch.Tensor:
    """Rows of the target's LM head for token_ids, [len, H], whatever the head's storage (a plain, tied or
    prepacked Linear): the head applied to the identity gives W^T (minus its bias, if any), block by block."""
    head = model.get_output_embeddings()
    weight = getattr(head, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 2:
        return weight[token_ids.to(weight.device)].float().cpu()
    size = model.config.get_text_config().hidden_size
    device = model.get_input_embeddings().weight.device
    dtype = model.get_input_embeddings().weight.dtype
    bias = head(torch.zeros(1, size, device=device, dtype=dtype))[0, token_ids.to(device)]
    blocks = []
    for start in range(0, size, 256):
        eye = torch.eye(size, device=device, dtype=dtype)[start : start + 256]
        blocks.append(head(eye)[:, token_ids.to(device)] - bias)
    return torch.cat(blocks).T.float().cpu().contiguous()


def reduced_vocabulary(labels: torch.Tensor, extra: frozenset[int]) -> torch.Tensor:
    """The token ids the training labels use (and the end-of-sequence ids), sorted."""
    seen = set(labels[labels != IGNORE].tolist()) | set(extra)
    return torch.tensor(sorted(seen), dtype=torch.long)


def to_reduced(labels: torch.Tensor, token_ids: torch.Tensor, vocab_width: int) -> torch.Tensor:
    """Target ids -> indices into the reduced vocabulary; an id outside it (held-out text only) -> IGNORE - 1."""
    lookup = torch.full((vocab_width,), IGNORE - 1, dtype=torch.long)
    lookup[token_ids] = torch.arange(len(token_ids))
    return torch.where(labels == IGNORE, IGNORE, lookup[labels.clamp_min(0)])


def medusa_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """sum_k 0.8^k CE(head_k, label_k) over [B, K, |S|] logits and [B, K] reduced labels."""
    total = logits.new_zeros(())
    for k in range(logits.shape[1]):
        if not (labels[:, k] != IGNORE).any():
            continue  # a batch of chunk ends: no label for this head (cross-entropy over nothing is NaN)
        total = total + MEDUSA_DECAY ** (k + 1) * F.cross_entropy(logits[:, k], labels[:, k], ignore_index=IGNORE)
    return total


@torch.inference_mode()
def accuracy(heads: MedusaHeads, features: Features, token_ids: torch.Tensor, top: int) -> list[float]:
    """Per head: the share of held-out positions whose label is among the head's `top` best tokens."""
    labels = to_reduced(features.labels, token_ids, heads.vocab_width)
    hits, counts = torch.zeros(heads.count), torch.zeros(heads.count)
    for start in range(0, len(labels), 512):
        logits = heads(features.hidden[start : start + 512])
        best = logits.topk(min(top, logits.shape[-1]), dim=-1).indices  # [B, K, top]
        label = labels[start : start + 512]
        valid = label != IGNORE
        hits += ((best == label[..., None]).any(-1) & valid).sum(0)
        counts += valid.sum(0)
    return (hits / counts.clamp_min(1)).tolist()


def fit(
    heads: MedusaHeads,
    features: Features,
    settings: TrainSettings,
    progress: Progress,
    on_step: Callable[[TrainStep], None] | None = None,
) -> list[TrainStep]:
    """Adam on the heads' blocks (the LM head rows stay frozen), shuffled batches, `epochs` passes."""
    labels = to_reduced(features.labels, heads.token_ids, heads.vocab_width)
    optimiser = torch.optim.Adam(heads.blocks.parameters(), lr=settings.learning_rate)
    generator = torch.Generator().manual_seed(settings.seed)
    batches = max(1, -(-len(labels) // settings.batch))
    steps: list[TrainStep] = []
    for epoch in range(settings.epochs):
        order = torch.randperm(len(labels), generator=generator)
        for b in range(batches):
            index = order[b * settings.batch : (b + 1) * settings.batch]
            logits = heads(features.hidden[index])
            loss = medusa_loss(logits, labels[index])
            if not loss.requires_grad:
                continue  # no label in this batch (rows that ended at once): nothing to learn from
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            valid = labels[index] != IGNORE
            right = (logits.argmax(-1) == labels[index]) & valid
            top1 = tuple((right.sum(0) / valid.sum(0).clamp_min(1)).tolist())
            steps.append(TrainStep(len(steps) + 1, epoch + 1, float(loss.detach()), top1))
            if on_step is not None:
                on_step(steps[-1])
            progress(
                f"epoch {epoch + 1}/{settings.epochs}, loss {steps[-1].loss:.3f}",
                len(steps) / (batches * settings.epochs),
            )
    return steps


class TrainError(UserError, ValueError):
    """Nothing to train on (too few tokens of text for the settings)."""


def collect_both(
    model: Any,
    tokenizer: Any,
    settings: TrainSettings,
    files: list[Path] | None,
    report_to: Progress,
    stop_ids: frozenset[int] = frozenset(),
) -> tuple[Features, Features, float]:
    """Features of the training files and of the held-out files (split before anything is read): the target's
    greedy continuations of prompts about them (heads/greedy.py), or a teacher-forced pass over their text. With
    the default files (files None) they are kept under the model cache and read back by the next training with
    the same collection settings (heads/data.py)."""
    if files is None:
        key = data_key(model, settings)
        saved = load_data(data_path(key), key)
        if saved is not None:
            report_to(f"collected data read from the model cache (its target passes took {saved[1]:.0f} s)", 0.55)
            (train, heldout), seconds = saved
        else:
            wide = replace(settings, heads=key["heads"])  # the labels every training of up to that many heads reads
            train, heldout, seconds = collect_both(model, tokenizer, wide, source_files(), report_to, stop_ids)
            save_data(data_path(key), key, (train, heldout), seconds)
        narrow = [replace(part, labels=part.labels[:, : settings.heads]) for part in (train, heldout)]
        return narrow[0], narrow[1], seconds
    started = time.perf_counter()
    train_files, heldout_files = split_files(files, settings.seed)
    if settings.data == "greedy":
        train, heldout = collect_greedy(model, tokenizer, settings, (train_files, heldout_files), stop_ids, report_to)
        return train, heldout, time.perf_counter() - started
    parts = []
    for name, chosen, tokens, span in (
        ("collecting", train_files, settings.train_tokens, (0.0, 0.45)),
        ("held-out", heldout_files, settings.heldout_tokens, (0.45, 0.1)),
    ):
        progress = lambda m, f, name=name, span=span: report_to(f"{name}: {m}", span[0] + span[1] * f)  # noqa: E731
        chunks = token_chunks(tokenizer, chosen, tokens, settings.chunk)
        if not chunks:
            raise TrainError(f"no text to train on among {len(chosen)} files ({name})")
        parts.append(collect(model, chunks, settings.heads, progress))
    return parts[0], parts[1], time.perf_counter() - started


def collect_greedy(
    model: Any,
    tokenizer: Any,
    settings: TrainSettings,
    files: tuple[list[Path], list[Path]],
    stop_ids: frozenset[int],
    report_to: Progress,
) -> tuple[Features, Features]:
    """The target's greedy answers to prompts about the training files and about the held-out files, decoded in
    shared batches (heldout rows cost no extra steps)."""
    budgets = (settings.train_tokens, settings.heldout_tokens)
    prompts = []
    for name, chosen, tokens in zip(("training", "held-out"), files, budgets, strict=True):
        asked = training_prompts(tokenizer, chosen, -(-3 * tokens // settings.new_tokens) + 2, settings.seed)
        if not asked:
            raise TrainError(f"no def or class to ask about among {len(chosen)} files ({name})")
        prompts.append(asked)
    progress = lambda m, f: report_to(f"collecting: {m}", 0.55 * f)  # noqa: E731
    dtype = collection_dtype(model, settings)
    collector = model
    if dtype != model.dtype:
        progress(f"a {dtype_name(dtype)} copy of the target decodes the answers", 0.0)
        collector = low_precision_copy(model, dtype)
        # oneDNN's bfloat16 kernels (AMX, AVX512-BF16), each weight packed once: a 64-row step ~1.2x faster (AMX)
        if native_bfloat16(model.device):
            prepack_linears(collector, COLLECT_BATCH_HINT, 1, dtype)
    reader = None if collector is model else model  # the held-out answers, re-read by the target itself
    train, heldout = greedy_split(
        collector, prompts, settings.heads, budgets, settings.new_tokens, settings.rows, stop_ids, progress, reader
    )
    return train, heldout


@dataclass(frozen=True)
class Fitted:
    """Heads fitted on collected features, measured on the held-out ones."""

    heads: MedusaHeads
    steps: list[TrainStep]
    seconds: float  # the fit alone
    top1: list[float]  # per head, on the held-out features
    top5: list[float]


def fit_medusa(
    model: Any,
    vocab_width: int,
    train: Features,
    heldout: Features,
    settings: TrainSettings,
    stop_ids: frozenset[int] = frozenset(),
    progress: Progress | None = None,
    on_step: Callable[[TrainStep], None] | None = None,
) -> Fitted:
    """Fresh heads on the training labels' vocabulary (and the stop ids), fitted, then measured on held-out data."""
    token_ids = reduced_vocabulary(train.labels, stop_ids)
    heads = MedusaHeads(train.hidden.shape[1], settings.heads, lm_head_rows(model, token_ids), token_ids, vocab_width)
    started = time.perf_counter()
    torch.manual_seed(settings.seed)
    steps = fit(heads, train, settings, progress or (lambda message, fraction: None), on_step)
    heads.eval()
    seconds = time.perf_counter() - started
    return Fitted(heads, steps, seconds, accuracy(heads, heldout, token_ids, 1), accuracy(heads, heldout, token_ids, 5))


def train_medusa(
    model: Any,
    tokenizer: Any,
    vocab_width: int,
    settings: TrainSettings,
    stop_ids: frozenset[int] = frozenset(),
    progress: Progress | None = None,
    on_step: Callable[[TrainStep], None] | None = None,
    files: list[Path] | None = None,
) -> tuple[MedusaHeads, TrainReport]:
    """Collect the self-distilled features (settings.data), fit the heads, measure them on the held-out files."""
    report_to = progress or (lambda message, fraction: None)
    train, heldout, collect_seconds = collect_both(model, tokenizer, settings, files, report_to, stop_ids)
    fitted = fit_medusa(
        model,
        vocab_width,
        train,
        heldout,
        settings,
        stop_ids,
        lambda m, f: report_to(f"training: {m}", 0.55 + 0.43 * f),
        on_step,
    )
    report = TrainReport(
        heads=settings.heads,
        data=settings.data,
        collect_dtype=dtype_name(collection_dtype(model, settings)),
        train_tokens=len(train.labels),
        heldout_tokens=len(heldout.labels),
        vocabulary=len(fitted.heads.token_ids),
        collect_seconds=round(collect_seconds, 1),
        train_seconds=round(fitted.seconds, 1),
        top1=[round(a, 4) for a in fitted.top1],
        top5=[round(a, 4) for a in fitted.top5],
        curve=loss_curve(fitted.steps),
    )
    report_to("heads trained", 1.0)
    return fitted.heads, report
