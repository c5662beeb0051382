"""The benchmark on a GPU with random-weight pairs of the built-in pair's sizes (scripts/gpu_check.sh).

Nothing is downloaded: the two models are built from assets/qwen2.5-coder-{1.5b,0.5b}-config.json
with random weights (bf16 on CUDA), the tokenizer is a synthetic one of the same vocabulary size
(one token per character of the prompt, plus filler tokens). Random models agree with each other
about as often as chance, so acceptance is near 0 and speculative decoding cannot pay: what this
measures is the cost side, the target's verify time against gamma and the draft/target cost ratio c.

Phases, each run even if one before it failed, each written to gpu-check-<device>.json as soon as it
ends (with its status, seconds and any error): eager (the four methods, the verify-cost curve, c);
eager_constant_gamma4 (the confidence stop off, so really gamma 4); eager_alternatives (the token-tree
verify, bf16 on CUDA); compiled, when the draft is launch-bound (c > 0.5) or --compile on: a static KV
cache and CUDA graphs through torch.compile for the one-token steps only, with dynamo's counters and
compile times; identity_fp32 (greedy identity where it means something) runs before it. A phase that would start
after --budget seconds is skipped, so the whole fits its timeout; --phases runs some of them (compiled needs eager).

Usage: python scripts/gpu_check.py [--device cuda] [--out DIR] [--max-new-tokens 64] [--compile auto|on|off]
       [--budget 230] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import string
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.bench import BenchSettings, format_curve, format_table, load_prompts, run_benchmark  # noqa: E402
from specviz.decoding.config import SpecConfig  # noqa: E402
from specviz.decoding.kvcache import compiled_decoder, disable_compiled_decoding, enable_compiled_decoding  # noqa: E402
from specviz.models.loading import ModelPair, PairSpec, compute_dtype  # noqa: E402

CONFIGS = {
    "target": ROOT / "assets" / "qwen2.5-coder-1.5b-config.json",
    "draft": ROOT / "assets" / "qwen2.5-coder-0.5b-config.json",
}
PHASES = ("eager", "eager_constant_gamma4", "eager_alternatives", "identity_fp32", "compiled")  # in running order
LAUNCH_BOUND = 0.5  # c above this: the draft is not much cheaper than the target per step
DRY_RUN_SCALE = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=4096,
)
BF16_SAME_NOTE = (
    "same = NO is expected here in bf16: a random model's logits are nearly flat, so a one-token step and a "
    "verify of several tokens round differently and the argmax flips between near-ties; identity is checked "
    "in fp32 (phase identity_fp32)"
)


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
    parser.add_argument(
        "--budget", type=float, default=230.0, help="seconds; a phase that would start later is skipped"
    )
    parser.add_argument("--dry-run", action="store_true", help="scaled-down models (a CPU check of this script)")
    parser.add_argument(
        "--phases", default=",".join(PHASES), help="which phases, comma-separated (a rerun of some on a GPU)"
    )
    args = parser.parse_args(argv)
    args.phases = args.phases.split(",")
    unknown = sorted(set(args.phases) - set(PHASES))
    if unknown:
        parser.error(f"unknown phases {unknown}; choose from {','.join(PHASES)}")
    return args


class Phases:
    """Each phase runs even if an earlier one failed; its result and status are written as soon as it ends."""

    def __init__(self, path: Path, budget: float, log, wanted: list[str]):
        self.path, self.budget, self.log, self.wanted = path, budget, log, wanted
        self.started = time.perf_counter()
        self.doc: dict = {"phases": {}, "results": {}}

    def run(self, name: str, work) -> dict | None:
        if name not in self.wanted:
            return None
        elapsed = time.perf_counter() - self.started
        if elapsed > self.budget:
            self.doc["phases"][name] = {"status": "skipped", "why": f"{elapsed:.0f} s past, budget {self.budget:.0f} s"}
            self.log(f"== phase {name}: skipped ({elapsed:.0f} s > budget {self.budget:.0f} s)")
            return self.write()
        self.log(f"== phase {name} (at {elapsed:.0f} s)")
        t = time.perf_counter()
        try:
            result, extra = work()
            self.doc["results"][name] = result
            status = {"status": "ok", **extra}
        except Exception as error:  # noqa: BLE001 - the next phases still run; the error is recorded
            traceback.print_exc()
            result, status = None, {"status": "failed", "error": f"{type(error).__name__}: {error}"[:2000]}
        status["seconds"] = round(time.perf_counter() - t, 1)
        self.doc["phases"][name] = status
        self.log(f"== phase {name}: {status['status']} in {status['seconds']} s")
        self.write()
        return result

    def write(self) -> None:
        self.path.write_text(json.dumps(self.doc, indent=1))

    @property
    def failed(self) -> list[str]:
        return [name for name, s in self.doc["phases"].items() if s["status"] == "failed"]


def dynamo_counters() -> dict:
    """dynamo's own counters (graph breaks, recompiles, unique graphs) and its compile times, for the report."""
    from torch._dynamo.utils import compile_times, counters

    wanted = ("stats", "graph_break", "recompiles", "frames", "inductor")
    out = {key: dict(counters[key]) for key in wanted if key in counters}
    out["compile_times"] = compile_times(repr="str")
    return out


def run_compiled(
    pair: ModelPair, prompts: dict[str, list[str]], settings: BenchSettings, *, eager: dict, backend: str, log
) -> tuple[dict, dict]:
    """The benchmark again with a static KV cache and CUDA graphs for the one-token steps of both models.

    Only one-token steps are compiled (max_tokens=1): verifies and prompt passes stay eager, so the
    compiles are two (one per model), not one per verify width."""
    log("static KV cache + torch.compile (mode reduce-overhead: CUDA graphs) for one-token steps; compiling ...")
    t = time.perf_counter()
    try:
        for model in (pair.target, pair.draft):
            enable_compiled_decoding(model, backend=backend, max_tokens=1)
        ours = replace(settings, methods=("baseline", "speculative"))
        # the benchmark's warm-up compiles; a second short run makes sure the graphs are captured
        run_benchmark(pair, {k: v[:1] for k, v in prompts.items()}, replace(ours, curve_gammas=1, curve_repeats=1), log)
        warm = time.perf_counter() - t
        log(f"compiled and warm in {warm:.1f} s")
        compiled = run_benchmark(pair, prompts, ours, log)
        steps = {role: compiled_decoder(m).steps for role, m in (("target", pair.target), ("draft", pair.draft))}
    finally:
        for model in (pair.target, pair.draft):
            disable_compiled_decoding(model)
    print(format_curve(compiled["verify_curve"]))
    print(format_table(compiled))
    c, c2 = eager["verify_curve"]["cost_ratio_c"], describe_costs(compiled, "compiled")
    print(
        f"compiled one-token steps taken: {steps}; c {c:.3f} -> {c2:.3f}; baseline "
        f"{eager['overall']['tokens_per_second']['baseline']:.1f} -> "
        f"{compiled['overall']['tokens_per_second']['baseline']:.1f} tok/s"
    )
    return compiled, {"compile_and_warm_seconds": round(warm, 1), "compiled_steps": steps, "dynamo": dynamo_counters()}


def identity_fp32(device: torch.device, scale: dict | None, prompts, settings: BenchSettings, log) -> tuple[dict, dict]:
    """Greedy speculative text equals the baseline's: checked in fp32 (TF32 off), where it is meaningful.

    In bf16 a random-weight model's logits are nearly flat: a one-token step and a verify of several
    tokens round differently, the argmax flips between near-ties, and "same" reads NO without a bug."""
    matmul_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        pair = random_pair(device, dtype=torch.float32, scale=scale)
        doc = run_benchmark(pair, prompts, settings, log)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
    print(format_table(doc))
    return doc, {"identical": doc["overall"]["identical"]}


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
    phases = Phases(out / f"gpu-check-{device.type}.json", args.budget, log, args.phases)
    scale = DRY_RUN_SCALE if args.dry_run else None
    pair = random_pair(device, scale=scale)
    log(f"random pair built in {time.perf_counter() - phases.started:.1f} s: {pair.names}")
    prompts = load_prompts(ROOT / "assets" / "prompts.json", args.categories.split(","), args.per_category)
    config = SpecConfig(gamma=4, schedule="auto", gamma_max=8, draft_confidence=0.7, max_new_tokens=args.max_new_tokens)
    settings = BenchSettings(
        config=config,
        chat=False,
        curve_gammas=args.curve_gammas,
        curve_repeats=5,
        methods=("baseline", "speculative", "hf_assisted", "hf_matched"),
    )
    # the extra eager runs: ours against the baseline, with a short curve (the eager phase measured the full one)
    short = replace(settings, methods=("baseline", "speculative"), curve_gammas=1, curve_repeats=1)
    eager = phases.run("eager", lambda: eager_phase(pair, prompts, settings, out))
    phases.run("eager_constant_gamma4", lambda: constant_phase(pair, prompts, short))
    phases.run("eager_alternatives", lambda: alternatives_phase(pair, prompts, short))
    # identity before compiling: it is the check of correctness, and the compiles may take what is left of the budget
    fp32 = replace(short, config=replace(config, max_new_tokens=min(args.max_new_tokens, 32)))
    phases.run("identity_fp32", lambda: identity_fp32(device, scale, prompts, fp32, log))
    # the compiled phase compares itself with the eager one, so it needs it
    if eager is not None and wants_compile(args.compile, eager["verify_curve"]["cost_ratio_c"]):
        backend = "eager" if args.dry_run and device.type == "cpu" else "inductor"
        compiled = phases.run(
            "compiled", lambda: run_compiled(pair, prompts, settings, eager=eager, backend=backend, log=log)
        )
        if compiled is not None:
            (out / f"verify_curve_{device.type}.json").write_text(json.dumps(compiled["verify_curve"], indent=1))
    if device.type == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB")
    print(
        f"JSON: {phases.path}  ({time.perf_counter() - phases.started:.0f} s in all); failed: {phases.failed or 'none'}"
    )
    return 1 if phases.failed else 0


def eager_phase(pair: ModelPair, prompts, settings: BenchSettings, out: Path) -> tuple[dict, dict]:
    doc = run_benchmark(pair, prompts, settings, print)
    (out / f"verify_curve_{pair.device.type}.json").write_text(json.dumps(doc["verify_curve"], indent=1))
    print(format_curve(doc["verify_curve"]))
    print(format_table(doc))
    print(BF16_SAME_NOTE)
    return doc, {"cost_ratio_c": describe_costs(doc, "eager")}


def constant_phase(pair: ModelPair, prompts, short: BenchSettings) -> tuple[dict, dict]:
    """Really gamma 4 every round: the confidence stop is off (random weights never pass 0.7, so with it on
    every round would draft one token and this would be gamma 1)."""
    config = replace(short.config, schedule="constant", gamma=4, draft_confidence=0.0)
    doc = run_benchmark(pair, prompts, replace(short, config=config), print)
    print("constant gamma 4, confidence stop off (random weights: acceptance near 0, the price of each round):")
    print(format_table(doc))
    return doc, {}


def alternatives_phase(pair: ModelPair, prompts, short: BenchSettings) -> tuple[dict, dict]:
    """The token-tree verify (alternatives: other candidates for the last drafted token, one custom 4D mask),
    eager, in the pair's dtype (bf16 on CUDA): the one path the CPU tests cannot run in bf16 attention."""
    # constant gamma 2, no confidence stop: every round drafts (the auto schedule drops to plain rounds when
    # nothing is accepted, as with random weights), so every round verifies a token tree
    config = replace(short.config, schedule="constant", gamma=2, alternatives=2, draft_confidence=0.0)
    doc = run_benchmark(pair, prompts, replace(short, config=config), print)
    print("eager, constant gamma 2 with 2 alternatives (token-tree verify):")
    print(format_table(doc))
    return doc, {}


def wants_compile(choice: str, c: float) -> bool:
    if choice == "auto":
        verdict = "launch-bound" if c > LAUNCH_BOUND else "not launch-bound"
        print(f"the draft's step costs {c:.2f} of the target's (threshold {LAUNCH_BOUND}): {verdict}")
    return choice == "on" or (choice == "auto" and c > LAUNCH_BOUND)


if __name__ == "__main__":
    sys.exit(main())
