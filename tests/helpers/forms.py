"""The tiny model written as the built-in pair's conversion writes a form, for the precision tests."""

from __future__ import annotations

import json

import torch

from specviz.models.convert import form_tensors
from specviz.models.streaming import Writer


def save_form(model, folder, form: str):
    """The model as builtin.py's conversion writes a form (through form_tensors and the streaming Writer)."""
    folder.mkdir(parents=True, exist_ok=True)
    linear = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    embedding = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, torch.nn.Embedding)}
    writer = Writer(folder / "model.safetensors")
    for name, tensor in model.state_dict().items():
        for stored_name, stored in form_tensors(name, tensor.float(), form, name in linear, name in embedding):
            writer.add(stored_name, stored)
    writer.close()
    config = model.config.to_dict()
    config["dtype"] = "float32" if form != "bfloat16" else "bfloat16"
    (folder / "config.json").write_text(json.dumps(config))
    model.generation_config.save_pretrained(folder)
    return folder
