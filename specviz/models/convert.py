"""A GGUF file converted to safetensors one tensor at a time, in one of the built-in pair's forms (builtin.py).

gguf's own dequantizer (the one transformers calls) turns each tensor into float32; transformers' name map says
what each is called in the model; the tensor is written in the form's dtype at once and dropped. The memory is
the .gguf's memory-mapped pages plus the largest tensor in float32 (the 0.9 GB LM head); transformers' own
GGUF loading holds every tensor before the model is built (about 10 GB for the 1.5B target).
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specviz.errors import ModelLoadError

EOS_TOKEN_IDS = [151645, 151643]  # the GGUFs keep only <|im_end|>; the releases' generation_config also stops at 151643
STORED = {"float32": "float32", "bfloat16": "bfloat16", "int8": "float32"}  # config.dtype written for each form
Stage = Callable[[str, float, str], None]  # (stage, fraction of it done, message): builtin.py's progress bar


def convert(gguf: Path, out: Path, form: str = "float32", stage: Stage | None = None) -> None:
    """Dequantize the GGUF tensor by tensor and save it in `form` (see the module docstring) plus the tokenizer.

    Most of the time goes to parsing the GGUF metadata (151k tokens and merges), once for the tokenizer and once
    for the config; the weights are written as gguf dequantizes them, one at a time.
    """
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    stage = stage or (lambda name, fraction, message: None)
    stage("tokenizer", 0.0, "reading the tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.save_pretrained(out)
    del tokenizer
    stage("config", 0.0, "reading the model metadata")
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config.dtype = STORED[form]
    layout = Layout.of(config)
    written = write_weights(gguf, out / "model.safetensors", layout, form, stage)
    if written != layout.expected:
        missing = sorted(layout.expected - written)
        raise ModelLoadError(f"{gguf.name} lacks {len(missing)} of its weights (e.g. {missing[0]}): reinstall it.")
    config.architectures = [layout.architecture]
    config.save_pretrained(out)
    generation = GenerationConfig.from_model_config(config)
    generation.eos_token_id = EOS_TOKEN_IDS
    generation.save_pretrained(out)
    gc.collect()


@dataclass(frozen=True)
class Layout:
    """A model's weights as transformers names them, read off an empty (meta) model of its config."""

    architecture: str
    names: dict[str, str]  # GGUF tensor name -> transformers parameter name
    linear: frozenset[str]  # parameters that are a Linear layer's weight
    embedding: frozenset[str]
    expected: frozenset[str]  # every parameter

    @classmethod
    def of(cls, config: Any) -> Layout:
        import torch
        from accelerate import init_empty_weights
        from transformers import AutoModelForCausalLM
        from transformers.modeling_gguf_pytorch_utils import TensorProcessor, get_gguf_hf_weights_map

        with init_empty_weights():
            skeleton = AutoModelForCausalLM.from_config(config)
        modules = list(skeleton.named_modules())
        return cls(
            architecture=type(skeleton).__name__,
            names=get_gguf_hf_weights_map(skeleton, TensorProcessor()),
            linear=frozenset(f"{name}.weight" for name, m in modules if isinstance(m, torch.nn.Linear)),
            embedding=frozenset(f"{name}.weight" for name, m in modules if isinstance(m, torch.nn.Embedding)),
            expected=frozenset(name for name, _ in skeleton.named_parameters()),
        )


def write_weights(gguf: Path, path: Path, layout: Layout, form: str, stage: Stage) -> set[str]:
    """Dequantize each GGUF tensor and write it in `form`, one at a time; return the parameters written."""
    import torch
    from gguf import GGUFReader
    from gguf.quants import dequantize

    from .streaming import Writer

    reader = GGUFReader(gguf)  # memory-mapped: its pages are the conversion's main memory
    tensors = [t for t in reader.tensors if t.name in layout.names]
    writer, written = Writer(path), set()
    try:
        for index, tensor in enumerate(tensors):
            stage("weights", index / len(tensors), f"converting the weights to {form}")
            name = layout.names[tensor.name]
            array = dequantize(tensor.data, tensor.tensor_type)  # float32 (a float32 tensor: a view of the file)
            values = torch.from_numpy(array if array.flags.writeable else array.copy())
            for stored_name, stored in form_tensors(
                name, values, form, name in layout.linear, name in layout.embedding
            ):
                writer.add(stored_name, stored)
            written.add(name)
            del values, array
    finally:
        del reader
        stage("save", 0.0, "writing the safetensors file")
        writer.close()
    return written


def form_tensors(name: str, values: Any, form: str, linear: bool, embedding: bool) -> list[tuple[str, Any]]:
    """What one float32 weight becomes in a form: (name, tensor) pairs. int8: a Linear weight as torch's dynamic
    quantization makes it (one symmetric scale per tensor: fastpath.quantize_linear), stored as its int8 values
    and `<name>_scale`; the embedding in bfloat16; the rest as it is."""
    import torch

    if form == "float32":
        return [(name, values)]
    if form == "bfloat16" or (form == "int8" and embedding):
        return [(name, values.to(torch.bfloat16))]
    if not linear:
        return [(name, values)]
    from .fastpath import weight_scale

    scale = weight_scale(values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch marks its quantized tensors deprecated; torchao is not here
        quantized = torch.quantize_per_tensor(values, scale, 0, torch.qint8)
    return [(name, quantized.int_repr()), (f"{name}_scale", torch.tensor(scale, dtype=torch.float64))]
