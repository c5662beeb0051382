"""Training the EAGLE head on the same self-distilled data as Medusa's heads (heads/train.py).

For a chunk x_0..x_{n-1} with the target's features f_i and argmax guesses g_i (for x_{i+1}), input i
(i = 0..n-2) is (emb(x_{i+1}), f_i) and the head must predict f_{i+1} (regression) and, through the frozen LM
head, the target's next-token distribution p_{i+1} = softmax(W_lm[S] f_{i+1}), whose argmax is g_{i+1}:
loss = SmoothL1(f^, f) + 0.1 CE(p, softmax(W_lm[S] f^)) (EAGLE's weights and soft labels), with uniform noise on the
input features f_i (EAGLE-1's augmentation: drafting feeds the head its own, imperfect, features). Chunks are cut into
windows of `window` tokens, a batch of windows per optimiser step; the head attends causally within its window.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from specviz.drafters import EAGLE
from specviz.drafters.eagle_head import EAGLE_INTERMEDIATE, EagleHead, head_config
from specviz.progress import Progress

from .greedy import collection_dtype, dtype_name
from .train import (
    IGNORE,
    Features,
    TrainError,
    TrainReport,
    TrainSettings,
    TrainStep,
    collect_both,
    lm_head_rows,
    loss_curve,
    reduced_vocabulary,
    to_reduced,
)

CE_WEIGHT = 0.1  # EAGLE's weight of the token loss beside the feature regression
# Half-width of the uniform noise on the input features while training (EAGLE-1's augmentation), as a share of the
# features' standard deviation, so that it scales with the target (docs/DESIGN.md, "Draft heads: Medusa and EAGLE")
FEATURE_NOISE = 0.133


@dataclass(frozen=True)
class Windows:
    embeds: torch.Tensor  # [W, L, H] emb(x_{i+1})
    inputs: torch.Tensor  # [W, L, H] f_i
    targets: torch.Tensor  # [W, L, H] f_{i+1}
    labels: torch.Tensor  # [W, L] g_{i+1} in the reduced vocabulary (IGNORE: none)


@torch.inference_mode()
def windows(model: Any, features: Features, token_ids: torch.Tensor, width: int, window: int) -> Windows:
    """Cut every chunk into (input, target) windows of `window` steps (a shorter tail is dropped)."""
    embedding = model.get_input_embeddings()
    labels = to_reduced(features.labels[:, 0], token_ids, width)  # row i: g_{i+1}
    parts: list[tuple[torch.Tensor, ...]] = []
    start = 0
    for n in features.lengths:
        ids, f, g = features.ids[start : start + n], features.hidden[start : start + n], labels[start : start + n]
        for a in range(0, n - 1 - window + 1, window):
            b = a + window  # inputs a..b-1 use x_{a+1..b}, f_a..f_{b-1}; targets f_{a+1..b}, g_{a+1..b} (row a..b-1)
            embeds = embedding(ids[a + 1 : b + 1].to(embedding.weight.device)).float().cpu()
            parts.append((embeds, f[a:b], f[a + 1 : b + 1], g[a:b]))
        start += n
    if not parts:
        longest = max(features.lengths, default=0)
        raise TrainError(
            f"the EAGLE head trains on windows of {window + 1} tokens, and the longest collected answer has "
            f"{longest}: ask for more training tokens, or use a target whose answers do not end at once"
        )
    return Windows(*(torch.stack([p[i] for p in parts]).clone() for i in range(4)))


def eagle_loss(head: EagleHead, batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """SmoothL1(f^, f) + 0.1 CE(p, q): the token loss against the target's whole distribution p = softmax(W_lm[S] f)
    from its true feature, not only its argmax (EAGLE's soft labels; docs/DESIGN.md, "Draft heads: Medusa and
    EAGLE")."""
    embeds, inputs, targets, labels = batch
    predicted = head(embeds, inputs)
    logits = head.reduced_logits(predicted)
    regression = F.smooth_l1_loss(predicted, targets)
    valid = labels != IGNORE
    teacher = F.softmax(head.reduced_logits(targets[valid]), dim=-1).detach()
    token = -(teacher * F.log_softmax(logits[valid], dim=-1)).sum(-1).mean() if valid.any() else logits.new_zeros(())
    return regression + CE_WEIGHT * token, logits


@torch.inference_mode()
def eagle_accuracy(head: EagleHead, data: Windows, top: int) -> float:
    """Share of held-out steps whose g_{i+1} is among the head's `top` best (from the true f_i: one step ahead)."""
    hits = total = 0
    for start in range(0, len(data.labels), 16):
        logits = head.reduced_logits(head(data.embeds[start : start + 16], data.inputs[start : start + 16]))
        best = logits.topk(min(top, logits.shape[-1]), dim=-1).indices
        label = data.labels[start : start + 16]
        valid = label != IGNORE
        hits += int(((best == label[..., None]).any(-1) & valid).sum())
        total += int(valid.sum())
    return hits / max(1, total)


def fit_eagle(
    head: EagleHead,
    data: Windows,
    settings: TrainSettings,
    progress: Progress,
    on_step: Callable[[TrainStep], None] | None = None,
    batch: int = 8,
) -> list[TrainStep]:
    trainable = [p for name, p in head.named_parameters() if not name.startswith("layer.embed_tokens")]
    optimiser = torch.optim.AdamW(trainable, lr=settings.learning_rate)
    generator = torch.Generator().manual_seed(settings.seed)
    count = len(data.labels)
    noise_width = FEATURE_NOISE * float(data.inputs.std())
    batches = max(1, -(-count // batch))
    steps: list[TrainStep] = []
    for epoch in range(settings.epochs):
        order = torch.randperm(count, generator=generator)
        for b in range(batches):
            index = order[b * batch : (b + 1) * batch]
            # Drafting feeds the head its own predicted features, which are off by a little: noisy inputs teach it
            # to read those too (the targets stay the true features).
            inputs = data.inputs[index]
            noise = (torch.rand(inputs.shape, generator=generator) * 2 - 1) * noise_width
            parts = (data.embeds[index], inputs + noise, data.targets[index], data.labels[index])
            loss, logits = eagle_loss(head, parts)
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            optimiser.step()
            valid = parts[3] != IGNORE
            top1 = float(((logits.argmax(-1) == parts[3]) & valid).sum() / valid.sum().clamp_min(1))
            steps.append(TrainStep(len(steps) + 1, epoch + 1, float(loss.detach()), (top1,)))
            if on_step is not None:
                on_step(steps[-1])
            progress(
                f"epoch {epoch + 1}/{settings.epochs}, loss {steps[-1].loss:.3f}",
                len(steps) / (batches * settings.epochs),
            )
    return steps


def train_eagle(
    model: Any,
    tokenizer: Any,
    vocab_width: int,
    settings: TrainSettings,
    stop_ids: frozenset[int] = frozenset(),
    progress: Progress | None = None,
    on_step: Callable[[TrainStep], None] | None = None,
    files: list | None = None,
    window: int = 64,
    intermediate: int = EAGLE_INTERMEDIATE,
) -> tuple[EagleHead, TrainReport]:
    report_to = progress or (lambda message, fraction: None)
    train, heldout, collect_seconds = collect_both(model, tokenizer, settings, files, report_to, stop_ids)
    token_ids = reduced_vocabulary(train.labels[:, :1], stop_ids)
    torch.manual_seed(settings.seed)
    head = EagleHead(head_config(model.config, intermediate), lm_head_rows(model, token_ids), token_ids, vocab_width)
    train_windows = windows(model, train, token_ids, vocab_width, window)
    heldout_windows = windows(model, heldout, token_ids, vocab_width, window)
    collected = time.perf_counter()
    steps = fit_eagle(head, train_windows, settings, lambda m, f: report_to(f"training: {m}", 0.55 + 0.43 * f), on_step)
    head.eval()
    report = TrainReport(
        kind=EAGLE,
        heads=1,
        data=settings.data,
        collect_dtype=dtype_name(collection_dtype(model, settings)),
        train_tokens=len(train.labels),
        heldout_tokens=len(heldout.labels),
        vocabulary=len(token_ids),
        collect_seconds=round(collect_seconds, 1),
        train_seconds=round(time.perf_counter() - collected, 1),
        top1=[round(eagle_accuracy(head, heldout_windows, 1), 4)],
        top5=[round(eagle_accuracy(head, heldout_windows, 5), 4)],
        curve=loss_curve(steps),
    )
    report_to("EAGLE head trained", 1.0)
    return head, report
