"""Trained heads on disk: one safetensors file per target, under the model cache, refused unless it is intact and
was trained on this very target.

The file holds the heads' tensors and, in its metadata, what they belong to: the target's fingerprint (a hash of
its config and of a sample of its input embedding), the shapes, a SHA-256 over every tensor's bytes, and the
training report. A file that cannot be read, lacks a key, belongs to another target, or whose bytes changed is
refused with a HeadsError that says which and what to do; it is never used.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from specviz.errors import UserError
from specviz.models.builtin import cache_root

from .eagle_head import EagleHead, head_config
from .heads_report import ReportError, check_report
from .medusa_heads import MedusaHeads

FORMATS = {"medusa": "specviz-medusa-1", "eagle": "specviz-eagle-1"}
Heads = MedusaHeads | EagleHead


class HeadsError(UserError):
    """Heads that cannot be used: none trained yet, or a file that is damaged or belongs to another target."""


def target_fingerprint(model: Any) -> str:
    """A hash of the target's config and of every 97th row of its input embedding: equal for the same weights,
    different for another model or another conversion of it (cheap: no pass over the whole model)."""
    config = model.config.to_json_string(use_diff=False) if hasattr(model.config, "to_json_string") else ""
    digest = hashlib.sha256(config.encode())
    embedding = model.get_input_embeddings().weight.detach()
    digest.update(embedding[::97].float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:32]


def kind_of(heads: Heads) -> str:
    return "eagle" if isinstance(heads, EagleHead) else "medusa"


def heads_path(fingerprint: str, kind: str = "medusa", root: Path | None = None) -> Path:
    return (root or cache_root()) / "heads" / f"{kind}-{fingerprint}.safetensors"


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def save_heads(heads: Heads, fingerprint: str, report: dict, path: Path) -> Path:
    tensors = {name: value.detach().cpu().contiguous() for name, value in heads.state_dict().items()}
    eagle = isinstance(heads, EagleHead)
    metadata = {
        "format": FORMATS[kind_of(heads)],
        "fingerprint": fingerprint,
        "count": str(1 if eagle else heads.count),
        "intermediate": str(heads.layer.config.intermediate_size if eagle else 0),
        "hidden": str(heads.lm_rows.shape[1]),
        "vocab_width": str(heads.vocab_width),
        "sha256": tensors_digest(tensors),
        "report": json.dumps(report),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    save_file(tensors, str(partial), metadata=metadata)
    partial.replace(path)  # a reader never sees half a file
    return path


def read_metadata(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as handle:
        return dict(handle.metadata() or {})


def cached_report(model: Any, kind: str = "medusa", fingerprint: str | None = None) -> dict | None:
    """The training report of `model`'s heads of `kind` in the model cache, from the file's metadata alone (no
    tensors, no checksum: load_heads checks those when the drafter runs); None when there are none to report.
    fingerprint: target_fingerprint(model), when the caller already has it (it hashes part of the embedding)."""
    fingerprint = fingerprint or target_fingerprint(model)
    path = heads_path(fingerprint, kind)
    if not path.exists():
        return None
    try:
        metadata = read_metadata(path)
        if metadata.get("format") != FORMATS[kind] or metadata.get("fingerprint") != fingerprint:
            return None
        return check_report(json.loads(metadata["report"]))
    except (SafetensorError, OSError, ValueError, KeyError, RecursionError):  # ReportError is a ValueError
        return None


def load_heads(model: Any, vocab_width: int, path: Path | None = None, kind: str = "medusa") -> tuple[Heads, dict]:
    """The heads of `kind` trained for `model`, checked; (heads, training report). Raises HeadsError otherwise."""
    fingerprint = target_fingerprint(model)
    path = path or heads_path(fingerprint, kind)
    what, it = ("EAGLE head", "it") if kind == "eagle" else ("Medusa heads", "them")
    if not path.exists():
        raise HeadsError(
            f"no {what} trained for this target yet: train {it} on the Heads page, or run "
            f"python -m specviz train-heads --kind {kind} ({path})"
        )
    try:
        metadata = read_metadata(path)
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise HeadsError(f"the heads file {path} is damaged ({exc}): delete it and train again") from exc
    try:
        if metadata["format"] != FORMATS[kind]:
            raise HeadsError(
                f"the heads file {path} has format {metadata['format']!r}, not {FORMATS[kind]!r}: train again"
            )
        if metadata["fingerprint"] != fingerprint:
            raise HeadsError(f"the heads file {path} was trained on another target: train again for this one")
        if tensors_digest(tensors) != metadata["sha256"]:
            raise HeadsError(
                f"the heads file {path} is damaged (its checksum does not match): delete it and train again"
            )
        count, hidden, intermediate = int(metadata["count"]), int(metadata["hidden"]), int(metadata["intermediate"])
        report = check_report(json.loads(metadata["report"]))
    except ReportError as exc:
        raise HeadsError(f"the heads file {path} has a bad training report ({exc}): delete it and train again") from exc
    except (KeyError, ValueError) as exc:
        raise HeadsError(f"the heads file {path} lacks its description ({exc}): delete it and train again") from exc
    if kind == "eagle":
        return _build_eagle(model, tensors, hidden, intermediate, vocab_width, path), report
    return _build(tensors, count, hidden, vocab_width, path), report


def _checked_vocabulary(tensors: dict[str, torch.Tensor], hidden: int, vocab_width: int, path: Path) -> tuple:
    ids = tensors.get("token_ids")
    rows = tensors.get("lm_rows")
    if ids is None or rows is None or ids.dim() != 1 or rows.shape != (len(ids), hidden):
        raise HeadsError(f"the heads file {path} has tensors of the wrong shape: train again")
    if len(ids) == 0 or int(ids.min()) < 0 or int(ids.max()) >= vocab_width or len(set(ids.tolist())) != len(ids):
        raise HeadsError(f"the heads file {path} names token ids this target does not have: train again")
    return rows, ids


def _build_eagle(
    model: Any, tensors: dict[str, torch.Tensor], hidden: int, intermediate: int, vocab_width: int, path: Path
) -> EagleHead:
    if hidden != model.config.get_text_config().hidden_size or not 1 <= intermediate <= 65536:
        raise HeadsError(f"the heads file {path} does not fit this target's width: train again")
    rows, ids = _checked_vocabulary(tensors, hidden, vocab_width, path)
    head = EagleHead(head_config(model.config, intermediate), rows, ids, vocab_width)
    try:
        head.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        raise HeadsError(f"the heads file {path} is not an EAGLE head of this shape: train again") from exc
    return head.eval()


def _build(tensors: dict[str, torch.Tensor], count: int, hidden: int, vocab_width: int, path: Path) -> MedusaHeads:
    """MedusaHeads from checked tensors; shapes and token ids are checked against the target, not trusted."""
    if not 1 <= count <= 8:
        raise HeadsError(f"the heads file {path} names {count} heads (1-8): train again")
    rows, ids = _checked_vocabulary(tensors, hidden, vocab_width, path)
    heads = MedusaHeads(hidden, count, rows, ids, vocab_width)
    try:
        heads.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        raise HeadsError(f"the heads file {path} does not match {count} heads of width {hidden}: train again") from exc
    return heads.eval()
