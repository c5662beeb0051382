"""pytest plugin for scripts/gpu_check.sh: the tests' tiny model pairs live on a CUDA GPU.

Loaded with `-p cuda_plugin` (scripts/ on PYTHONPATH) before the test modules are collected, it
replaces specviz.models.tiny.tiny_pair with a version that moves both models to CUDA; the tests' own calls
with CPU tensors (reference forwards, target.generate) are moved to the model's device. Everything
else (the engine, its generators, the verify rule, the chi-square test) runs unchanged on CUDA.

SPECVIZ_LOSSLESS_RUNS=N sets the number of seeded runs per config of test_lossless's chi-square test over
its 8 configs (the module's RUNS, 2000 by default): those runs are sequential, launch-bound on a GPU, and
8 x 2000 of them do not fit a 10-minute loan. The test keeps its significance level; fewer runs only lower
its power.
"""

from __future__ import annotations

import functools
import os

import pytest
import torch

import specviz.models.tiny as tiny

# SPECVIZ_PLUGIN_DEVICE=cpu runs the same wrapping on the CPU (a dry run of this plugin without a GPU).
_wanted = os.environ.get("SPECVIZ_PLUGIN_DEVICE", "cuda")
DEVICE = (
    torch.device(_wanted)
    if _wanted != "cuda"
    else torch.device("cuda", torch.cuda.current_device())
    if torch.cuda.is_available()
    else None
)
_original_tiny_pair = tiny.tiny_pair
LOWERED = "test_first_two_tokens_follow_the_target"  # the test whose runs SPECVIZ_LOSSLESS_RUNS sets


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


def _on_device(model, device):
    model.to(device)
    model.register_forward_pre_hook(
        lambda module, args, kwargs: (_to(args, device), _to(kwargs, device)), with_kwargs=True
    )
    generate = model.generate

    @functools.wraps(generate)
    def generate_on_device(*args, **kwargs):
        return generate(*_to(args, device), **_to(kwargs, device))

    model.generate = generate_on_device
    return model


def cuda_tiny_pair(*args, **kwargs):
    pair = _original_tiny_pair(*args, **kwargs)
    _on_device(pair.target, DEVICE)
    if pair.draft is not None:
        _on_device(pair.draft, DEVICE)
    pair.device = DEVICE
    pair.names = dict(pair.names, device=str(DEVICE))
    return pair


def pytest_configure(config):
    if DEVICE is None:
        raise RuntimeError("cuda_plugin: this torch sees no CUDA GPU (SPECVIZ_PLUGIN_DEVICE=cpu for a dry run)")
    tiny.tiny_pair = cuda_tiny_pair
    torch.backends.cuda.matmul.allow_tf32 = False  # the exactness tests compare fp32 logits at 1e-4
    torch.backends.cudnn.allow_tf32 = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """RUNS lowered only for the 8 configs of test_first_two_tokens_follow_the_target: with fewer runs the
    unequal-width tests (29-32 ids, some 800 joint cells) would pool every cell into one and reject."""
    runs, module = os.environ.get("SPECVIZ_LOSSLESS_RUNS"), getattr(item, "module", None)
    if not runs or getattr(item, "originalname", "") != LOWERED or not hasattr(module, "RUNS"):
        yield
        return
    default, module.RUNS = module.RUNS, int(runs)
    try:
        yield
    finally:
        module.RUNS = default


def pytest_report_header(config):
    name = torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else "dry run"
    runs = os.environ.get("SPECVIZ_LOSSLESS_RUNS", "the tests' own")
    return f"cuda_plugin: tiny pairs on {DEVICE} ({name}); lossless runs per config: {runs}"
