"""Faster CPU kernels for a loaded float32 model, same math: oneDNN linear layers with prepacked weights.

Why: with few rows (one decode step, or a verify over gamma + 1 tokens) MKL's sgemm repacks the whole weight
matrix on every call, so a verify costs several target steps. oneDNN can pack a weight once into its blocked
layout and reuse it: `torch.ops.mkldnn._reorder_linear_weight` packs, `torch.ops.mkldnn._linear_pointwise`
multiplies (the pair of ops torch.compile's CPU backend uses for dynamic shapes). The result is the same
y = x W^T + b in float32; only the summation order inside the kernel differs (about 1e-6 relative), as it
already does between MKL's 1-row and many-row kernels. The packing is chosen for 8 rows (batch_hint=8) and
inputs of fewer than 4 rows are padded to 4 (min_rows=4), where oneDNN's kernels are fastest; the figures are
in docs/notes/2026-12-engine.md, "Performance notes".

The model is converted in place and is then for inference only (no gradients, no save_pretrained).
It must be applied to the target for every method that is compared (baseline, speculative,
transformers' assisted generation), which is the case when the loaded pair's target is converted.
Quantized (int8) layers, other dtypes and non-CPU devices are left as they are. The heads' training packs its
bfloat16 copy of the target the same way (dtype=torch.bfloat16; docs/DESIGN.md, "Draft heads: Medusa and EAGLE").
"""

from __future__ import annotations

import contextvars
import copy
import functools
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable

import torch
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

from .rows import in_pieces


def prepack_available() -> bool:
    """oneDNN is compiled in and enabled, and the two private ops exist in this torch."""
    mkldnn = getattr(torch.ops, "mkldnn", None)
    return bool(
        torch.backends.mkldnn.is_available()
        and torch.backends.mkldnn.enabled
        and mkldnn is not None
        and hasattr(mkldnn, "_reorder_linear_weight")
        and hasattr(mkldnn, "_linear_pointwise")
    )


class PrepackedLinear(nn.Module):
    """A float32 (or bfloat16) nn.Linear whose weight lives in oneDNN's blocked layout, packed once at conversion."""

    def __init__(self, linear: nn.Linear, batch_hint: int = 1, min_rows: int = 1):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.min_rows = min_rows
        self.dtype = linear.weight.dtype
        weight = linear.weight.detach()
        # A buffer, not a parameter: it is an opaque packed tensor, not a trainable weight.
        self.register_buffer(
            "packed_weight", torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint), persistent=False
        )
        bias = linear.bias.detach().clone() if linear.bias is not None else None
        self.register_buffer("bias", bias, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != self.dtype or x.device.type != "cpu" or x.requires_grad:
            raise RuntimeError(f"this PrepackedLinear runs {self.dtype} inference on CPU only")
        flat = x.reshape(-1, self.in_features)
        return in_pieces(flat, self._multiply).reshape(*x.shape[:-1], self.out_features)

    def _multiply(self, flat: torch.Tensor) -> torch.Tensor:
        rows = flat.shape[0]
        if rows >= self.min_rows:
            return torch.ops.mkldnn._linear_pointwise(flat.contiguous(), self.packed_weight, self.bias, "none", [], "")
        # Few rows: pad with zero rows up to min_rows, where oneDNN's kernel for this packing is faster;
        # every output row depends on its own input row only, so the padding changes no result.
        padded = torch.cat([flat, flat.new_zeros(self.min_rows - rows, self.in_features)])
        return torch.ops.mkldnn._linear_pointwise(padded, self.packed_weight, self.bias, "none", [], "")[:rows]

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            "oneDNN prepacked"
        )


def _convertible(module: nn.Module, dtype: torch.dtype) -> bool:
    return (
        type(module) is nn.Linear
        and module.weight.dtype == dtype
        and module.weight.device.type == "cpu"
        and module.weight.dim() == 2
    )


@torch.inference_mode()
def prepack_linears(
    model: nn.Module, batch_hint: int = 8, min_rows: int = 4, dtype: torch.dtype = torch.float32
) -> int:
    """Replace every CPU nn.Linear of model in dtype (in place) with a PrepackedLinear; return how many.

    A no-op (returns 0) when oneDNN is not available, on GPUs, for quantized layers or layers in another dtype.
    A weight tied to another module (the LM head and the input embedding) stays in place for that
    module; the packed copy is extra memory.
    """
    if not prepack_available():
        return 0
    targets = [(name, module) for name, module in model.named_modules() if _convertible(module, dtype)]
    # Packing is mostly the kernel zeroing fresh pages for the packed copies, on whichever thread touches
    # them first: one packing thread per core spreads that out (docs/notes/2026-12-engine.md, "Performance notes").
    replace_in_threads(model, targets, lambda linear: PrepackedLinear(linear, batch_hint, min_rows))
    if targets:
        _own_remaining_tensors(model)
        model._specviz_prepacked = len(targets)
    return len(targets)


def replace_in_threads(
    model: nn.Module, named: list[tuple[str, nn.Module]], convert: Callable[[nn.Module], nn.Module]
) -> None:
    """Replace each named submodule with convert(it), converting on one thread per core (torch lets go of the GIL)."""
    with ThreadPoolExecutor(max(1, torch.get_num_threads())) as pool:
        converted = list(pool.map(lambda item: convert(item[1]), named))
    for (name, _), module in zip(named, converted, strict=True):
        model.set_submodule(name, module)


def _own_remaining_tensors(model: nn.Module) -> None:
    """Copy the tensors that stay dense (embedding, norms) into ordinary memory.

    transformers maps the safetensors file into memory; while any tensor of it is alive, the whole
    mapping stays, and the pages that packing read count as resident. Copying what remains lets it go.
    """
    for module in model.modules():
        if isinstance(module, PrepackedLinear):
            continue
        for tensor in list(module.parameters(recurse=False)) + list(module.buffers(recurse=False)):
            if tensor is not None and tensor.layout == torch.strided and tensor.device.type == "cpu":
                tensor.data = tensor.data.clone()


def is_prepacked(model: nn.Module) -> bool:
    return bool(getattr(model, "_specviz_prepacked", 0))


def quantize_draft(model: Any) -> Any:
    """int8 weights, prepacked for fbgemm: on CPU the draft's Linear layers cost several times less per token.

    The same result as torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8), faster:
    layers are quantized in parallel threads (torch releases the GIL), and no throwaway zero weight is packed
    per layer (see docs/notes/2026-12-bench-and-loading.md, "Loading: quantizing the draft").
    """
    linears = [(name, module) for name, module in model.named_modules() if type(module) is torch.nn.Linear]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch marks eager-mode quantization deprecated; torchao is not installed
        replace_in_threads(model, linears, quantize_linear)
    return model


def weight_scale(weight: torch.Tensor) -> float:
    """The scale quantize_dynamic gives a weight: symmetric per tensor, max |w| over the qint8 range (zero point 0)."""
    from torch.ao.quantization.qconfig import default_dynamic_qconfig

    observer = default_dynamic_qconfig.weight()
    observer(weight.detach().float())
    scale, _zero_point = observer.calculate_qparams()
    return float(scale)


def quantize_linear(linear: torch.nn.Linear) -> torch.nn.Module:
    """One Linear as quantize_dynamic converts it: per-tensor symmetric qint8 weight, float bias."""
    weight = linear.weight.detach().float()
    quantized = torch.quantize_per_tensor(weight, weight_scale(weight), 0, torch.qint8)
    return dynamic_linear(quantized, None if linear.bias is None else linear.bias.detach().float())


def scale_rows(flat: torch.Tensor, pin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """([n + 1, in]: each of flat's n token rows divided by its max |x|, then the pin row; [n, 1]: those maxima)."""
    peak = flat.abs().amax(dim=1, keepdim=True).clamp_min_(1e-12)
    return torch.cat([flat / peak, pin]), peak


def per_token_linear(
    scaled: torch.Tensor,
    packed: torch.classes.quantized.LinearPackedParamsBase,  # a DynamicLinear's _packed_params._packed_params
    peak: torch.Tensor,
    bias: torch.Tensor | None,
) -> torch.Tensor:
    """fbgemm's dynamic int8 op over the scaled rows (the pin row fixes its one activation scale), each output row then
    scaled back by its token's max |x|; the op adds the bias, so it is taken off before and put back after."""
    out = torch.ops.quantized.linear_dynamic(scaled, packed, True)[:-1]  # True: reduce_range, as torch's path
    if bias is None:
        return out.mul_(peak)
    return torch.addcmul(bias, out.sub_(bias), peak)


@functools.cache
def scripted_per_token() -> tuple[Any, Any]:
    """scale_rows and per_token_linear as TorchScript: each becomes one call from Python, not five small ops. Their
    kernels take microseconds; each op's call from Python took as long again, which made a one-token draft forward
    4-6 ms slower than torch's path; scripted, it is within 1 ms (docs/notes/2026-12-ragged-batching.md). The same
    ops in the same order: the same bits."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # marked deprecated for torch.compile, which needs a C++ compiler at run time
        return torch.jit.script(scale_rows), torch.jit.script(per_token_linear)


class TokenScales:
    """One per_token_activations block's scaled inputs. Linear layers that read the same tensor (a decoder layer's
    q, k and v projections; its gate and up projections) share its scaling: the tensor is kept until the next one
    arrives, so `is` can only match the same input, and transformers' models do not change a layer's input in place."""

    def __init__(self) -> None:
        self.input: torch.Tensor | None = None
        self.scaled = self.peak = torch.empty(0)

    def scale(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """scale_rows of x's token rows, computed once per input tensor."""
        if x is not self.input:
            flat = x.reshape(-1, x.shape[-1])
            self.scaled, self.peak = scripted_per_token()[0](flat, pin_row(flat.shape[1], flat.dtype, flat.device))
            self.input = x
        return self.scaled, self.peak


@functools.cache
def pin_row(width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[1, width]: +1, -1, then zeros. Beside rows within [-1, 1] it fixes the call's activation scale."""
    row = torch.zeros(1, width, dtype=dtype, device=device)
    row[0, :2] = torch.tensor([1.0, -1.0])
    return row


_PER_TOKEN: contextvars.ContextVar[TokenScales | None] = contextvars.ContextVar(
    "specviz_per_token_activations", default=None
)


@contextmanager
def per_token_activations() -> Iterator[None]:
    """Within it (this thread only), the int8 draft quantizes each token's activations with a scale of its own, so a
    row of a batched forward computes the same numbers beside any other rows as alone (decoding/batch.py)."""
    token = _PER_TOKEN.set(TokenScales())
    try:
        yield
    finally:
        _PER_TOKEN.reset(token)


class DraftLinear(DynamicLinear):
    """torch's dynamic int8 Linear, whose activations' scale comes from the whole input: a token's output depends on
    the other tokens of the call. Under per_token_activations each token row x is divided by its own max |x| (then
    within [-1, 1]) and one pinning row holding +1 and -1 fixes the call's scale, so a row is quantized the same alone
    or beside any others; its output is scaled back by max |x| (per-token activation scales, as serving engines' W8A8
    kernels use). Outside it: torch's own path, unchanged. The per-token path runs on every draft forward of a batch,
    B = 1 included, so it calls fbgemm's op directly, scales each input once for the layers that share it, and runs
    its small ops as TorchScript (scripted_per_token)."""

    float_bias: torch.Tensor | None = None  # bias() unpacks the whole weight on every call: kept here instead

    def set_weight_bias(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().set_weight_bias(weight, bias)
        self.float_bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scales = _PER_TOKEN.get()
        if scales is None:
            return super().forward(x)
        scaled, peak = scales.scale(x)
        out = scripted_per_token()[1](scaled, self._packed_params._packed_params, peak, self.float_bias)
        return out.reshape(*x.shape[:-1], out.shape[-1])


def dynamic_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> torch.nn.Module:
    """torch's dynamically quantized Linear around a qint8 weight (activations quantized per call, or per token
    under per_token_activations; float bias)."""
    out_features, in_features = weight.shape
    # a 1x1 placeholder: the constructor would otherwise quantize and prepack a zero (out x in) weight
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager-mode quantization is marked deprecated; torchao is not installed
        module = DraftLinear(1, 1, bias_=bias is not None, dtype=torch.qint8)
    module.set_weight_bias(weight, bias)
    module.in_features, module.out_features = in_features, out_features
    return module


def cpu_description() -> tuple[str, frozenset[str]]:
    """(this CPU's model name, its instruction-set flags) from /proc/cpuinfo's first processor; elsewhere the
    platform's name and no flags."""
    import platform
    from pathlib import Path

    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    first: dict[str, str] = {}
    for line in lines:
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
    name = first.get("model name") or platform.processor() or platform.machine()
    return name, frozenset(first.get("flags", "").split())


def native_bfloat16(device: torch.device) -> bool:
    """bfloat16 matmuls run natively here (a GPU, or a CPU with AVX512-BF16 or AMX): faster than float32.
    On an AVX2-only CPU oneDNN emulates them, slower than float32 (docs/notes/2026-12-engine.md,
    "Measurements on this project's CPU")."""
    if device.type != "cpu":
        return True
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(torch.backends.mkldnn.is_available() and check is not None and check())


def dense_weight(model: nn.Module, name: str, dtype: torch.dtype) -> torch.Tensor:
    """The parameter `name` of model as a plain tensor in dtype (a new one), a prepacked Linear's weight unpacked
    straight into dtype (exact, and faster than unpacking to float32 first)."""
    module_name, _, attribute = name.rpartition(".")
    module = model.get_submodule(module_name)
    if isinstance(module, PrepackedLinear) and attribute == "weight":
        return module.packed_weight.to_dense(dtype)
    tensor = module.bias if isinstance(module, PrepackedLinear) else getattr(module, attribute)
    return tensor.detach().to(dtype=dtype, copy=True)


@torch.inference_mode()
def low_precision_copy(model: Any, dtype: torch.dtype = torch.bfloat16) -> Any:
    """A copy of a transformers model (prepacked or not) in dtype, for inference: built empty (accelerate), then
    filled tensor by tensor on one thread per core, so it never holds a second full-precision copy. The buffers
    (rotary frequencies) are the model's own; tied weights stay tied."""
    from accelerate import init_empty_weights

    with init_empty_weights():  # a config of its own: _from_config keeps (and may set fields of) the one it gets
        clone = type(model)._from_config(copy.deepcopy(model.config))
    names = [name for name, _ in clone.named_parameters()]
    with ThreadPoolExecutor(max(1, torch.get_num_threads())) as pool:
        tensors = list(pool.map(lambda name: dense_weight(model, name, dtype), names))
    for name, tensor in zip(names, tensors, strict=True):
        module_name, _, attribute = name.rpartition(".")
        setattr(clone.get_submodule(module_name), attribute, nn.Parameter(tensor, requires_grad=False))
    own = dict(model.named_buffers())
    for name, buffer in clone.named_buffers():  # built on the CPU: the model's own, on its device
        if name in own:
            buffer.data = own[name].detach().clone()
    clone.tie_weights()
    return clone.eval()
