"""Collected training data on disk: the target's features and guesses, kept under the model cache so a second
training (the other kind of head, more epochs) skips the target passes, which are most of the time.

One safetensors file per (target, collection settings); its name is a hash of both, and its metadata repeats them
with the collection's time. A file that cannot be read, or whose tensors do not fit together, is ignored (the data
is collected again and the file rewritten): it holds no code and nothing that could change what a head decodes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from specviz.drafters.heads_file import target_fingerprint
from specviz.models.builtin import cache_root

from .features import Features, TrainSettings
from .greedy import PROMPT_RECIPE, collection_dtype, dtype_name

FORMAT = "specviz-heads-data-1"
FIT_ONLY = ("epochs", "batch", "learning_rate")  # settings that change the training, not the data
KEEP = 3  # collections kept on disk (about 90 MB each for 12,000 tokens of the built-in target): the newest


def collected_heads(settings: TrainSettings) -> int:
    """Label columns a collection keeps: at least the default K, so that trainings of fewer heads (and the EAGLE head,
    which reads the first column) share one collection; each training takes its first settings.heads columns."""
    return max(settings.heads, TrainSettings.heads)


def data_key(model: Any, settings: TrainSettings) -> dict:
    """What names a collection: the target, the settings that shape the data and, for greedy answers, the prompts'
    recipe (answers to other prompts are other data under the same settings)."""
    collection = {k: v for k, v in asdict(settings).items() if k not in FIT_ONLY + ("collect_dtype",)}
    collection["heads"] = collected_heads(settings)
    recipe = {"prompts": PROMPT_RECIPE} if settings.data == "greedy" else {}
    dtype = collection_dtype(model, settings)  # named only when it is not the target's own (older keys stay valid)
    if dtype != model.dtype:
        recipe["collect_dtype"] = dtype_name(dtype)
    return {"format": FORMAT, "target": target_fingerprint(model), **collection, **recipe}


def data_path(key: dict, root: Path | None = None) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return (root or cache_root()) / "heads" / f"data-{digest}.safetensors"


def save_data(path: Path, key: dict, parts: tuple[Features, Features], seconds: float) -> None:
    tensors = {}
    for name, part in zip(("train", "heldout"), parts, strict=True):
        tensors[f"{name}.hidden"] = part.hidden.contiguous()
        tensors[f"{name}.labels"] = part.labels.contiguous()
        tensors[f"{name}.ids"] = part.ids.contiguous()
        tensors[f"{name}.lengths"] = torch.tensor(part.lengths, dtype=torch.long)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    save_file(tensors, str(partial), metadata={"key": json.dumps(key, sort_keys=True), "seconds": f"{seconds:.1f}"})
    partial.replace(path)
    prune(path.parent)


def prune(folder: Path, keep: int = KEEP) -> list[Path]:
    """Delete all but the `keep` collections in the folder written or read last (the heads are other files)."""
    files = sorted(folder.glob("data-*.safetensors"), key=lambda f: f.stat().st_mtime, reverse=True)
    for old in files[keep:]:
        old.unlink(missing_ok=True)
    return files[keep:]


def load_data(path: Path, key: dict) -> tuple[tuple[Features, Features], float] | None:
    """The saved parts and the seconds their collection took, or None if the file is missing or unusable."""
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
        if json.loads(metadata.get("key", "null")) != key:
            return None
        seconds = float(metadata["seconds"])
        tensors = load_file(str(path))
        parts = tuple(_part(tensors, name, key["heads"]) for name in ("train", "heldout"))
    except (OSError, SafetensorError, KeyError, ValueError, TypeError, RuntimeError):
        return None
    try:  # a collection read back counts as new for prune: the one in use is the last to go
        os.utime(path)
    except OSError:
        pass  # a read-only cache: nothing is pruned there either
    return parts, seconds


def _part(tensors: dict[str, torch.Tensor], name: str, heads: int) -> Features:
    hidden, labels = tensors[f"{name}.hidden"], tensors[f"{name}.labels"]
    ids, lengths = tensors[f"{name}.ids"], tensors[f"{name}.lengths"].tolist()
    n = len(ids)
    if hidden.dim() != 2 or hidden.shape[0] != n or labels.shape != (n, heads) or sum(lengths) != n:
        raise ValueError(f"{name}: tensors that do not fit together")
    return Features(hidden.float(), labels.long(), ids.long(), tuple(int(x) for x in lengths))
