"""The benchmark on a GPU with random-weight pairs of the built-in pair's sizes (scripts/gpu_check.sh).

Nothing is downloaded: the two models are built from assets/qwen2.5-coder-{1.5b,0.5b}-config.json
with random weights (bf16 on CUDA), the tokenizer is a synthetic one of the same vocabulary size
(one token per character of the prompt, plus filler tokens). Random models agree with each other
about as often as chance, so acceptance is near 0 and speculative decoding cannot pay: what this
measures is the cost side, the target's verify time against gamma and the draft/target cost ratio c.

If the draft's step costs more than half the target's (small models on a GPU are bound by kernel
launches and Python, not by their size), it says so with the figures, turns on a static KV cache and
CUDA graphs through torch.compile for the draft's and the target's one-token steps (the baseline's
too), and measures again.

Usage: python scripts/gpu_check.py [--device cuda] [--out DIR] [--max-new-tokens 64] [--compile auto|on|off]
"""

from __future__ import annotations

import argparse
import json
import string
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.bench import BenchSettings, format_curve, format_table, load_prompts, run_benchmark  # noqa: E402
from specviz.config import SpecConfig  # noqa: E402
from specviz.kvcache import compiled_decoder, enable_compiled_decoding  # noqa: E402
from specviz.models import ModelPair, PairSpec, compute_dtype  # noqa: E402

CONFIGS = {
    "target": ROOT / "assets" / "qwen2.5-coder-1.5b-config.json",
    "draft": ROOT / "assets" / "qwen2.5-coder-0.5b-config.json",
}
LAUNCH_BOUND = 0.5  # c above this: the draft is not much cheaper than the target per step


def synthetic_tokenizer(vocab_size: int):
    """One token per printable character, then filler tokens up to vocab_size (for random ids' text)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    symbols = ["<unk>"] + list(dict.fromkeys(string.printable))
    symbols += [f"<{i}>" for i in range(len(symbols), vocab_size)]
    core = Tokenizer(models.WordLevel({s: i for i, s in enumerate(symbols)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<unk>")


def random_model(path: Path, device: torch.device, dtype: torch.dtype, seed: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    data = {k: v for k, v in json.loads(path.read_text()).items() if not k.startswith("_")}
    data.update(eos_token_id=None, bos_token_id=None, pad_token_id=0)
    config = Qwen2Config(**data)
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(config, dtype=dtype)
    model.eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def random_pair(device: torch.device, dtype: torch.dtype | None = None, scale: dict | None = None) -> ModelPair:
    """Target and draft at the built-in pair's sizes (or scaled down with `scale` for a CPU dry run)."""
    dtype = dtype or compute_dtype(device)
    paths = CONFIGS
    if scale:
        paths = {}
        for role, path in CONFIGS.items():
            data = json.loads(path.read_text())
            data.update(scale)
            small = Path(f"/tmp/specviz-gpu-check-{role}.json")
            small.write_text(json.dumps(data))
            paths[role] = small
    target = random_model(paths["target"], device, dtype, seed=0)
    draft = random_model(paths["draft"], device, dtype, seed=1)
    tokenizer = synthetic_tokenizer(target.config.vocab_size)
    names = {
        "target": "random Qwen2 (Qwen2.5-Coder-1.5B sizes)",
        "draft": "random Qwen2 (Qwen2.5-Coder-0.5B sizes)",
        "device": str(device),
        "dtype": str(dtype).removeprefix("torch."),
        "draft_quantized": "no",
    }
    return ModelPair(target, draft, tokenizer, device, dtype, PairSpec(target="random", draft="random"), names)


def describe_costs(doc: dict, label: str) -> float:
    curve = doc["verify_curve"]
    t, d = curve["target_step_seconds"], curve["draft_step_seconds"]
    c = curve["cost_ratio_c"]
    verify = ", ".join(
        f"g={g}: {s * 1000:.2f} ms" for g, s in zip(curve["gamma"], curve["target_seconds"], strict=True)
    )
    print(f"[{label}] target step {t * 1000:.2f} ms, draft step {d * 1000:.2f} ms, c = {c:.3f}; verify {verify}")
    return c


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default=str(ROOT / "out"))
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--per-category", type=int, default=2)
    parser.add_argument("--categories", default="code,prose")
    parser.add_argument("--curve-gammas", type=int, default=16)
    parser.add_argument(
        "--compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="static cache + CUDA graphs for the one-token steps: auto = when c > 0.5",
    )
    parser.add_argument("--dry-run", action="store_true", help="scaled-down models (a CPU check of this script)")
    return parser.parse_args(argv)


def run_compiled(
    pair: ModelPair, prompts: dict[str, list[str]], settings: BenchSettings, *, eager: dict, c: float, backend: str, log
) -> dict:
    """The benchmark again with a static KV cache and CUDA graphs for the one-token steps of both models."""
    log(
        "static KV cache + torch.compile (mode reduce-overhead: CUDA graphs) for the draft's and the "
        "target's one-token steps; compiling ..."
    )
    t = time.perf_counter()
    for model in (pair.target, pair.draft):
        enable_compiled_decoding(model, backend=backend)
    ours = replace(settings, methods=("baseline", "speculative"))
    # the benchmark's warm-up compiles; a second short run makes sure the graphs are captured
    run_benchmark(pair, {k: v[:1] for k, v in prompts.items()}, replace(ours, curve_gammas=1, curve_repeats=1), log)
    log(f"compiled and warm in {time.perf_counter() - t:.1f} s")
    compiled = run_benchmark(pair, prompts, ours, log)
    print(format_curve(compiled["verify_curve"]))
    print(format_table(compiled))
    c2 = describe_costs(compiled, "compiled")
    steps = {role: compiled_decoder(m).steps for role, m in (("target", pair.target), ("draft", pair.draft))}
    print(
        f"compiled one-token steps taken: {steps}; c {c:.3f} -> {c2:.3f}; baseline "
        f"{eager['overall']['tokens_per_second']['baseline']:.1f} -> "
        f"{compiled['overall']['tokens_per_second']['baseline']:.1f} tok/s"
    )
    return compiled


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print("gpu_check: no CUDA GPU visible to this torch", file=sys.stderr)
            return 2
        torch.backends.cuda.matmul.allow_tf32 = True
        print(f"device: {torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = lambda message: print(message, flush=True)

    started = time.perf_counter()
    scale = (
        dict(
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=4096,
        )
        if args.dry_run
        else None
    )
    pair = random_pair(device, scale=scale)
    log(f"random pair built in {time.perf_counter() - started:.1f} s: {pair.names}")
    prompts = load_prompts(ROOT / "assets" / "prompts.json", args.categories.split(","), args.per_category)
    config = SpecConfig(gamma=4, schedule="auto", gamma_max=8, draft_confidence=0.7, max_new_tokens=args.max_new_tokens)
    settings = BenchSettings(
        config=config,
        chat=False,
        curve_gammas=args.curve_gammas,
        curve_repeats=5,
        methods=("baseline", "speculative", "hf_assisted", "hf_matched"),
    )
    results = {}

    doc = run_benchmark(pair, prompts, settings, log)
    print(format_curve(doc["verify_curve"]))
    print(format_table(doc))
    c = describe_costs(doc, "eager")
    results["eager"] = doc
    constant = run_benchmark(
        pair,
        prompts,
        replace(settings, config=replace(config, schedule="constant"), methods=("baseline", "speculative")),
        log,
    )
    print("constant gamma 4 (random weights: acceptance near 0, so this shows the price of each round):")
    print(format_table(constant))
    results["eager_constant_gamma4"] = constant

    compile_now = args.compile == "on" or (args.compile == "auto" and c > LAUNCH_BOUND)
    if args.compile == "auto":
        verdict = "launch-bound" if c > LAUNCH_BOUND else "not launch-bound"
        print(f"the draft's step costs {c:.2f} of the target's (threshold {LAUNCH_BOUND}): {verdict}")
    if compile_now:
        backend = "eager" if args.dry_run and device.type == "cpu" else "inductor"
        results["compiled"] = run_compiled(pair, prompts, settings, eager=doc, c=c, backend=backend, log=log)
    if device.type == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB")
    path = out / f"gpu-check-{device.type}.json"
    path.write_text(json.dumps(results, indent=1))
    (out / f"verify_curve_{device.type}.json").write_text(
        json.dumps(results.get("compiled", results["eager"])["verify_curve"], indent=1)
    )
    print(f"JSON: {path}  ({time.perf_counter() - started:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
