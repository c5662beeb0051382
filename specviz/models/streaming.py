"""safetensors files read and written one tensor at a time, with plain file reads (never a memory map).

Why not from_pretrained for the built-in pair: it memory-maps the file, and every page a conversion reads (packing
for oneDNN, quantizing) stays resident, counted in the process's memory beside the converted copy, until the whole
mapping goes: loading peaked at twice the model. Read into a fresh tensor instead, converted and dropped at once,
the peak is the loaded model plus one tensor (the largest ones first, while little else is loaded). The page cache
still holds the file, but as cache the kernel can drop, not as the process's memory.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length, a JSON header
{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the tensors' bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
NAMES = {dtype: name for name, dtype in DTYPES.items()}
MAX_HEADER = 100 << 20  # safetensors' own limit


@dataclass(frozen=True)
class Entry:
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    begin: int  # absolute offset in the file
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


def entries(path: Path) -> list[Entry]:
    """The tensors of one .safetensors file, as its header lists them."""
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > MAX_HEADER:
            raise ValueError(f"{path}: a {length}-byte header is not a safetensors file")
        header = json.loads(handle.read(length))
    start = 8 + length
    found = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        found.append(Entry(name, DTYPES[info["dtype"]], tuple(info["shape"]), start + begin, start + end))
    return found


def read(handle, entry: Entry) -> torch.Tensor:
    """One tensor, read into memory of its own (no mapping of the file stays behind)."""
    tensor = torch.empty(entry.shape, dtype=entry.dtype)
    if entry.nbytes:
        handle.seek(entry.begin)
        view = memoryview(tensor.view(-1).view(torch.uint8).numpy())
        if handle.readinto(view) != entry.nbytes:
            raise ValueError(f"{handle.name}: {entry.name} is cut short")
    return tensor


def stream(files: list[Path], first: Callable[[str], bool] = lambda name: False) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) for every tensor of the files, largest first (the names `first` picks before all others)."""
    listed = [(path, entry) for path in files for entry in entries(path)]
    listed.sort(key=lambda item: (not first(item[1].name), -item[1].nbytes))
    handles: dict[Path, object] = {}
    try:
        for path, entry in listed:
            if path not in handles:
                handles[path] = open(path, "rb")  # noqa: SIM115 (closed below)
            yield entry.name, read(handles[path], entry)
    finally:
        for handle in handles.values():
            handle.close()


class Writer:
    """A .safetensors file written as tensors arrive: their bytes go to a side file, the header and the bytes are
    joined in close(). Nothing but one tensor is held in memory."""

    def __init__(self, path: Path, metadata: dict[str, str] | None = None):
        self.path = Path(path)
        self.data_path = self.path.with_name(self.path.name + ".data")
        self.data = open(self.data_path, "wb")  # noqa: SIM115 (closed in close)
        self.header: dict[str, object] = {"__metadata__": dict(metadata or {"format": "pt"})}
        self.offset = 0

    def add(self, name: str, tensor: torch.Tensor) -> None:
        tensor = tensor.detach().contiguous().cpu()
        raw = tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        self.data.write(raw)
        self.header[name] = {
            "dtype": NAMES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [self.offset, self.offset + len(raw)],
        }
        self.offset += len(raw)

    def close(self) -> None:
        self.data.close()
        header = json.dumps(self.header, separators=(",", ":")).encode()
        header += b" " * (-len(header) % 8)  # the data starts 8-byte aligned, as safetensors writes it
        with open(self.path, "wb") as out, open(self.data_path, "rb") as data:
            out.write(struct.pack("<Q", len(header)))
            out.write(header)
            shutil.copyfileobj(data, out, 16 << 20)
        os.remove(self.data_path)
