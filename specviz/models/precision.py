"""How the pair's weights are held on the CPU: float32 (the reference), bfloat16 (half the memory, fast where the CPU
runs it natively), int8 (the least memory); auto is the one measured to speculate fastest that fits (models/choice.py).
Memory and speed on this project's CPU: docs/notes/2026-12-precision.md.

  fp32  the exact dequantized GGUF weights; Linear layers prepacked for oneDNN (fastpath.PrepackedLinear)
  bf16  weights rounded to bfloat16, prepacked for oneDNN's bfloat16 kernels (AVX512-BF16, AMX); half the memory
  int8  weight-only int8, one scale per output row (the embedding too); activations in bfloat16
        (torch._weight_int8pack_mm)

Each precision is its own target p, and speculative sampling is exact for any p. In every form a Linear layer
computes each output row from its own input row, bit for bit alone or among up to 32 rows
(tests/models/test_precision.py; bfloat16's kernel blocks 33 and more differently, so a feed multiplies in pieces:
models/rows.py), and the target's attention is made row-invariant (models/attention.py), so a verify's logits equal
single steps' bit for bit and greedy speculative text is plain decoding's. Dynamic int8 quantization
(activation scales from the whole input) would make a row depend on the others: it stays for the draft, whose q is
only compared with what the draft itself drew. The draft is int8 dynamic on the CPU (fastpath.quantize_draft); a
batch of rows scales its activations per token instead (fastpath.per_token_activations), so that a row's drafts do
not depend on the other rows.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .rows import in_pieces

ROW_CHUNK = 8192  # rows quantized at a time: the float copy of the LM head alone would be 0.9 GB


@dataclass(frozen=True)
class Precision:
    name: str  # fp32 | bf16 | int8
    dtype: torch.dtype  # what activations (and the non-Linear weights) are computed in
    bytes_per_weight: float  # of the Linear layers as loaded


PRECISIONS = {
    "fp32": Precision("fp32", torch.float32, 4),
    "bf16": Precision("bf16", torch.bfloat16, 2),
    "int8": Precision("int8", torch.bfloat16, 1),
}


def resolve_precision(name: str) -> Precision:
    """A named precision ("auto" is resolved before, by measurement: models/choice.py)."""
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}: use auto, {', '.join(PRECISIONS)}")
    return PRECISIONS[name]


class Int8Linear(nn.Module):
    """y = x W^T + b with W held as int8, one bfloat16 scale per output row (symmetric, round to nearest):
    W = scale * W_int8. Weight-only: the input is not quantized, so each output row depends on its own input row."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        scales = torch.empty(self.out_features, dtype=torch.float32)
        quantized = torch.empty(weight.shape, dtype=torch.int8)
        for start in range(0, self.out_features, ROW_CHUNK):  # the float copy one block of rows at a time
            rows = weight[start : start + ROW_CHUNK].float()
            scale = rows.abs().amax(dim=1).clamp(min=1e-12) / 127.0
            quantized[start : start + ROW_CHUNK] = torch.round(rows / scale[:, None]).clamp(-127, 127).to(torch.int8)
            scales[start : start + ROW_CHUNK] = scale
        self.register_buffer("weight_int8", quantized, persistent=False)
        self.register_buffer("scales", scales.to(torch.bfloat16), persistent=False)
        self.register_buffer("bias", None if bias is None else bias.to(torch.bfloat16), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(torch.bfloat16)
        out = in_pieces(flat, lambda rows: torch._weight_int8pack_mm(rows, self.weight_int8, self.scales))
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weights"


class Int8Embedding(nn.Module):
    """An embedding held as int8 rows, one bfloat16 scale per row (the int8 target's): a looked-up row is
    scale * row_int8, in bfloat16. `weight` is the int8 table (its device and a fingerprint read it)."""

    def __init__(self, weight: torch.Tensor, padding_idx: int | None = None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = weight.shape
        self.padding_idx = padding_idx
        linear = Int8Linear(weight, None)  # the same per-row quantization
        self.register_buffer("weight", linear.weight_int8, persistent=False)
        self.register_buffer("scales", linear.scales, persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(ids, self.weight).to(torch.bfloat16) * self.scales[ids].unsqueeze(-1)


class UpcastEmbedding(nn.Embedding):
    """An embedding stored in bfloat16 whose rows come out in `dtype` (the draft's float32): half the memory of its
    largest tensor, at the cost of its values' last bits."""

    def __init__(self, weight: torch.Tensor, dtype: torch.dtype, padding_idx: int | None = None):
        super().__init__(weight.shape[0], weight.shape[1], padding_idx=padding_idx, _weight=weight, _freeze=True)
        self.out_dtype = dtype

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return super().forward(ids).to(self.out_dtype)


# ---------------------------------------------------------------- loading a model one tensor at a time

MMAP_THRESHOLD = 1 << 20


def fixed_mmap_threshold() -> None:
    """Allocations of 1 MiB and more get pages of their own, returned when freed (glibc's mallopt).

    Why: glibc raises its threshold to the size of the last large block freed (up to 32 MiB), so the weights read
    and freed while loading (27 MiB each) were then carved from the heap between the packed copies, and their
    holes were never returned: the bfloat16 target held 5.8 GB instead of 3.9 GB. A fixed threshold turns that off.
    Elsewhere than glibc this does nothing."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "mallopt"):
            libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
    except OSError:
        pass


@dataclass(frozen=True)
class Converter:
    """How one model's tensors are converted as they stream in (load_streamed)."""

    precision: Precision
    draft: bool
    quantize: bool  # the draft's Linear layers become torch's dynamic int8
    dtype: torch.dtype  # what the model computes in
    prepack: bool  # the target's float Linear layers prepacked for oneDNN

    def linear(self, weight: torch.Tensor, bias: torch.Tensor | None, scale: float | None) -> nn.Module:
        from .fastpath import PrepackedLinear, dynamic_linear, quantize_linear

        if weight.dtype == torch.int8:  # the int8 form: torch's dynamic int8, as stored
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch marks its quantized tensors deprecated; torchao is not here
                quantized = torch._make_per_tensor_quantized_tensor(weight, scale, 0)
            return dynamic_linear(quantized, None if bias is None else bias.float())
        if not self.draft and self.precision.name == "int8":
            return Int8Linear(weight, bias)
        linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device="meta")
        linear.weight = nn.Parameter(weight.to(self.dtype), requires_grad=False)
        if bias is not None:
            linear.bias = nn.Parameter(bias.to(self.dtype), requires_grad=False)
        if self.draft:
            return quantize_linear(linear) if self.quantize else linear
        return PrepackedLinear(linear, batch_hint=8, min_rows=4) if self.prepack else linear

    def embedding(self, weight: torch.Tensor, padding: int | None) -> nn.Module | None:
        """The embedding's own module where this form needs one; None: a plain parameter in dtype."""
        if self.draft and self.quantize:
            return UpcastEmbedding(weight.to(torch.bfloat16), self.dtype, padding)
        if not self.draft and self.precision.name == "int8":
            return Int8Embedding(weight, padding)
        return None


def load_streamed(folder: Path, precision: Precision, draft: bool, quantize: bool, prepack: bool = True) -> Any:
    """A converted built-in model (builtin.py's forms) built empty and filled one tensor at a time, each Linear
    converted as its weight arrives (prepacked, int8, or the draft's dynamic int8) and the original dropped at once:
    the peak is the loaded model plus one tensor (streaming.py says why from_pretrained doubles it).

    The target computes in the precision's dtype; a quantized draft in float32 (its Linear layers take float32
    input), with a bfloat16 embedding; an unquantized draft in the precision's dtype. prepack=False (the bench's
    --no-prepack) keeps the target's float Linear layers as they are."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    from .fastpath import native_bfloat16, prepack_available

    fixed_mmap_threshold()
    dtype = torch.float32 if (draft and quantize) else precision.dtype
    config = AutoConfig.from_pretrained(folder)
    config.dtype = dtype
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    # oneDNN packs bfloat16 only where the CPU has the instructions (AVX512-BF16 or AVX-NE-CONVERT)
    native = precision.name == "fp32" or native_bfloat16(torch.device("cpu"))
    prepack = prepack and not draft and precision.name != "int8" and prepack_available() and native
    converted = fill(model, folder, Converter(precision, draft, quantize, dtype, prepack))
    model.generation_config = GenerationConfig.from_pretrained(folder)
    if prepack:
        model._specviz_prepacked = converted
    return model.eval()


def fill(model: nn.Module, folder: Path, convert: Converter) -> int:
    """Stream the folder's tensors into the empty model, converted; return how many Linear layers were converted.
    Biases and int8 scales come first (a Linear is converted when its weight arrives), then the largest tensors."""
    from .streaming import stream

    linears = {name for name, module in model.named_modules() if type(module) is nn.Linear}
    embeddings = {name for name, module in model.named_modules() if isinstance(module, nn.Embedding)}
    biases: dict[str, torch.Tensor] = {}
    scales: dict[str, float] = {}
    converted = 0
    small_first = lambda name: name.endswith(("_scale", ".bias"))  # noqa: E731 (a Linear's weight needs them)
    for name, tensor in stream(sorted(folder.glob("*.safetensors")), first=small_first):
        module_name, _, attribute = name.rpartition(".")
        module = model.get_submodule(module_name)
        if attribute.endswith("_scale"):
            scales[f"{module_name}.{attribute.removesuffix('_scale')}"] = float(tensor)
        elif module_name in linears and attribute == "bias":
            biases[module_name] = tensor
        elif module_name in linears and attribute == "weight":
            model.set_submodule(module_name, convert.linear(tensor, biases.pop(module_name, None), scales.get(name)))
            converted += 1
        elif module_name in embeddings and (own := convert.embedding(tensor, module.padding_idx)) is not None:
            model.set_submodule(module_name, own)
        else:
            setattr(module, attribute, nn.Parameter(tensor.to(convert.dtype), requires_grad=False))
        del tensor
    missing = [name for name, value in [*model.named_parameters(), *model.named_buffers()] if value.is_meta]
    if missing or biases:
        raise ValueError(f"{folder} lacks {len(missing) + len(biases)} tensors, e.g. {(missing or list(biases))[0]}")
    return converted
