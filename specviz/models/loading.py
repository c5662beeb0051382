"""Model pairs: a target p and a draft q that share a vocabulary, loaded from one place.

Sources: the built-in offline pair ("builtin"), a hub id, a local model directory, a local .gguf file.
Device "auto": CUDA in bf16 (accelerate's device_map="auto" over several GPUs or when the target does not
fit one), else MPS in fp16, else the CPU in the chosen precision (precision.py: bf16 by default where the CPU
runs it natively, fp32 the reference, int8 the least memory) with the draft's Linear layers quantized to int8.
The built-in pair is read one tensor at a time (precision.load_streamed): its peak is what stays loaded.
Before any weights are read, what the pair will take is compared with the memory available (check_memory).
Remote code runs only on an explicit opt-in. The pair must share one vocabulary.
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from specviz.errors import ModelLoadError
from specviz.progress import Progress, relay_tqdm, scaled

from . import builtin
from .attention import is_row_invariant, make_row_invariant
from .choice import auto_choice
from .fastpath import native_bfloat16, prepack_linears, quantize_draft
from .memory import check_memory
from .precision import Int8Linear, Precision, load_streamed, resolve_precision
from .prefetch import prefetch_files
from .sources import (
    BUILTIN,
    TRUST_REMOTE_CODE_ENV,
    Source,
    call_pretrained,
    load_config,
    load_tokenizer,
    resolve_source,
)
from .vocabulary import restrict_draft

GPU_HEADROOM = 0.85  # share of one GPU's free memory the target may fill


@dataclass(frozen=True)
class PairSpec:
    target: str = BUILTIN
    draft: str | None = BUILTIN  # None: no draft model (the n-gram drafter only)
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    quantize_draft: bool | None = None  # int8 dynamic quantization of the draft's Linear layers; None: on CPU only
    trust_remote_code: bool = False
    prepack_target: bool = True  # float32 CPU target: oneDNN prepacked Linear weights (same math, faster
    # kernels); used by every method, baseline included (specviz.models.fastpath)
    precision: str = "auto"  # on the CPU: auto | fp32 | bf16 | int8 (specviz.models.precision)
    draft_vocabulary: int | None = None  # the draft proposes only the most frequent ids (models/vocabulary.py)


@dataclass
class ModelPair:
    """Loaded models. Shared between runs and sessions: per-run state never lives here."""

    target: Any  # transformers PreTrainedModel (p)
    draft: Any | None  # transformers PreTrainedModel (q), or None
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    spec: PairSpec
    names: dict[str, str] = field(default_factory=dict)  # target, draft, device, dtype: for display and traces
    # token id -> its text: every round shows the text of its drafted tokens and of the top p, q and residual entries
    _token_texts: dict[int, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def eos_ids(self) -> frozenset[int]:
        ids = set()
        for source in (self.target.generation_config, self.target.config):
            eos = getattr(source, "eos_token_id", None)
            ids.update([eos] if isinstance(eos, int) else list(eos or []))
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return frozenset(ids)

    def token_text(self, token_id: int) -> str:
        text = self._token_texts.get(token_id)
        if text is None:
            text = self._token_texts[token_id] = self.tokenizer.decode([token_id])
        return text

    def decode(self, token_ids: list[int] | tuple[int, ...]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def encode_prompt(self, text: str, chat: bool = True) -> list[int]:
        return encode_text(self.tokenizer, text, chat)


def encode_text(tokenizer: Any, text: str, chat: bool = True) -> list[int]:
    """Chat prompts go through the tokenizer's chat template; raw text is a plain continuation."""
    if chat and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": text}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        return list(ids)
    return list(tokenizer(text)["input_ids"])


# ---------------------------------------------------------------- sources


# ---------------------------------------------------------------- device, dtype, quantization


def resolve_device(name: str) -> torch.device:
    """auto: the first CUDA GPU, else Apple's MPS, else the CPU. An explicit device must exist."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps"):
        raise ModelLoadError(f"Unknown device {name!r}: use auto, cpu, cuda, cuda:N or mps.")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"Device {name} was asked for, but this torch sees no CUDA GPU: use auto or cpu.")
        index = torch.cuda.current_device() if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise ModelLoadError(f"Device {name} does not exist: this machine has {torch.cuda.device_count()} GPU(s).")
        return torch.device("cuda", index)
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError("Device mps was asked for, but MPS is not available here: use auto or cpu.")
    return device


def compute_dtype(device: torch.device, precision: Precision | None = None) -> torch.dtype:
    """bf16 on CUDA (fp16 where bf16 is missing), fp16 on MPS; on the CPU the precision's (fp32 without one)."""
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "mps":
        return torch.float16
    return precision.dtype if precision is not None else torch.float32


def cpu_precision(name: str, device: torch.device) -> Precision | None:
    """The CPU's precision for this name (auto: models/choice.py's pick, timed at the first load); None off the CPU,
    where the dtype is the GPU's."""
    if device.type != "cpu":
        return None
    if name == "auto":
        name = auto_choice().precision
    try:
        return resolve_precision(name)
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from None


def builtin_forms(device: torch.device, precision: Precision | None, quantize: bool) -> dict[str, str]:
    """Which converted form of each built-in model a load reads (builtin.py): what it computes in, or its source."""
    if precision is None:  # a GPU: bfloat16 weights, converted to the device's dtype as they load
        return {"target": "bfloat16", "draft": "bfloat16"}
    target = "float32" if precision.name == "fp32" else "bfloat16"
    return {"target": target, "draft": "int8" if quantize else target}


def resolve_quantize(flag: bool | None, device: torch.device) -> bool:
    if flag is None:
        return device.type == "cpu"
    if flag and device.type != "cpu":
        raise ModelLoadError(
            f"int8 dynamic quantization of the draft runs on the CPU only, not on {device}: "
            f"turn it off or use device cpu."
        )
    return flag


def model_bytes(config: Any, dtype: torch.dtype, allow_code: bool) -> int:
    """Size of the weights in dtype, counted on a model built on the meta device (allocates nothing)."""
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM

    with init_empty_weights():
        empty = AutoModelForCausalLM.from_config(config, trust_remote_code=allow_code)
    return sum(p.numel() for p in empty.parameters()) * dtype.itemsize


def shard_target(requested: str, device: torch.device, config: Any, dtype: torch.dtype, allow_code: bool) -> bool:
    """accelerate's device_map="auto" when there are several GPUs, or when the target does not fit one."""
    if device.type != "cuda" or requested not in ("auto", "cuda"):
        return False  # an explicit cuda:N pins the model there
    if torch.cuda.device_count() > 1:
        return True
    free, _total = torch.cuda.mem_get_info(device)
    return model_bytes(config, dtype, allow_code) > GPU_HEADROOM * free


# ---------------------------------------------------------------- from_pretrained with clear errors


def allow_remote_code(spec: PairSpec) -> bool:
    """Off unless the user opts in: the PairSpec flag or SPECVIZ_TRUST_REMOTE_CODE=1."""
    opt_in = os.environ.get(TRUST_REMOTE_CODE_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return spec.trust_remote_code or opt_in


def load_model(
    source: Source, config: Any | None, device: torch.device, dtype: torch.dtype, allow_code: bool, shard: bool
) -> Any:
    """from_pretrained straight onto the device (no CPU copy first); sharded by accelerate if asked."""
    from transformers import AutoModelForCausalLM, GgufConfig

    kwargs: dict[str, Any] = {"dtype": dtype, "trust_remote_code": allow_code, **source.file_kwargs()}
    if source.gguf_file:  # a dense model, as for the built-in pair (kernels could keep GGUF blocks otherwise)
        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    elif config is not None:
        kwargs["config"] = config
    if shard:
        kwargs["device_map"] = "auto"
    elif device.type != "cpu":
        kwargs["device_map"] = {"": device}
    with relay_tqdm(lambda fraction: None):  # no console bars over the caller's own progress display
        model = call_pretrained(source, lambda **kw: AutoModelForCausalLM.from_pretrained(source.path, **kwargs, **kw))
    return model.eval()


# ---------------------------------------------------------------- checks

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)


def has_own_tokenizer(source: Source) -> bool:
    """A bare weights directory has none: the draft then reads the target's token ids as they are."""
    if source.kind != "dir":
        return True
    return any((Path(source.path) / name).is_file() for name in TOKENIZER_FILES)


def same_tokenizer_files(a: Source, b: Source) -> bool:
    """Byte-identical tokenizer files mean an identical vocabulary (the built-in pair): no second load needed."""
    if a.kind not in ("dir", "builtin") or b.kind not in ("dir", "builtin"):
        return False
    files_a, files_b = tokenizer_files(Path(a.path)), tokenizer_files(Path(b.path))
    return bool(files_a) and files_a == files_b


def tokenizer_files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in TOKENIZER_FILES if (folder / name).is_file()}


def check_vocab(target_tokenizer: Any, draft_tokenizer: Any, target: Source, draft: Source) -> None:
    """Draft and target must map the same strings to the same ids, or the draft's proposals mean nothing to p."""
    p_vocab, q_vocab = target_tokenizer.get_vocab(), draft_tokenizer.get_vocab()
    if p_vocab == q_vocab:
        return
    detail = f"{len(p_vocab)} vs {len(q_vocab)} tokens"
    if len(p_vocab) == len(q_vocab):
        detail += f", {sum(q_vocab.get(t) != i for t, i in p_vocab.items())} of them with other ids"
    raise ModelLoadError(
        f"The target {target.label} and the draft {draft.label} do not share a vocabulary ({detail}): "
        f"speculative decoding needs a draft from the same model family, with the same tokenizer."
    )


def check_width(config: Any, tokenizer: Any, source: Source) -> None:
    """Every token the tokenizer can produce must have an embedding row (heads may be padded wider)."""
    rows = getattr(config.get_text_config(), "vocab_size", None)
    if rows is not None and rows < len(tokenizer):
        raise ModelLoadError(
            f"The {source.role} model {source.label} has {rows} embedding rows, fewer than the "
            f"{len(tokenizer)} tokens of the pair's tokenizer: it cannot read every token."
        )


def warm_up(model: Any | None, device: torch.device) -> None:
    """One 1-token forward (none without a model): it faults in weights that from_pretrained memory-mapped and
    starts the kernels' thread pools now, so that the first measured run is not the slow one."""
    if model is None:
        return
    with torch.inference_mode():
        model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=device))


def set_pad_token(model: Any, tokenizer: Any) -> None:
    """generate() wants a pad id; models without one get the tokenizer's pad, else their first EOS."""
    generation = model.generation_config
    if generation.pad_token_id is not None:
        return
    pad = tokenizer.pad_token_id
    if pad is None:
        eos = generation.eos_token_id if generation.eos_token_id is not None else tokenizer.eos_token_id
        pad = eos[0] if isinstance(eos, (list, tuple)) else eos
    generation.pad_token_id = pad


# ---------------------------------------------------------------- load_pair


def load_pair(spec: PairSpec, progress: Progress | None = None) -> ModelPair:
    """Load target p (and draft q unless spec.draft is None) with a shared tokenizer; see the module docstring.

    Cheap checks (device, sources, remote code, vocabulary) run before any weights are read.
    """
    allow_code = allow_remote_code(spec)
    device = resolve_device(spec.device)
    precision = cpu_precision(spec.precision, device)
    dtype = compute_dtype(device, precision)
    quantize = resolve_quantize(spec.quantize_draft, device) and spec.draft is not None
    target = resolve_source(spec.target, "target")
    draft = resolve_source(spec.draft, "draft") if spec.draft is not None else None
    forms = builtin_forms(device, precision, quantize)
    (target, draft), report = prepare_builtin_sources((target, draft), progress, forms)

    report("reading configs and tokenizers", 0.02)
    configs = read_configs((target, draft), device, precision, quantize, allow_code)
    tokenizer = pair_tokenizer(target, draft, configs, allow_code)
    prefetch_weights([s for s in (draft, target) if s is not None])  # the order they are first read in full

    shard = "target" in configs and shard_target(spec.device, device, configs["target"], dtype, allow_code)
    load_the_draft = functools.partial(
        load_draft,
        draft,
        configs.get("draft"),
        dtype=torch.float32 if quantize else dtype,  # int8 dynamic Linear layers take float32 input
        allow_code=allow_code,
        quantize=quantize,
        tokenizer=tokenizer,
        report=report,
        precision=precision,
    )
    draft_model = None
    if draft is not None and not shard:  # first: the prefetch reads its weights first, and quantizing it can
        report(f"loading the draft {draft.label}", 0.3)  # overlap the reading of the target's
        draft_model = load_the_draft(device=device)
    report(f"loading the target {target.label}", 0.45)
    target_model, prepacked = load_target(target, configs.get("target"), device, precision, allow_code, shard, spec)
    check_width(target_model.config, tokenizer, target)
    set_pad_token(target_model, tokenizer)
    if getattr(target_model.config, "_attn_implementation", None) in ("sdpa", "eager"):
        make_row_invariant(target_model)  # a verify's rows get single steps' bits (models/attention.py)
    if shard:  # inputs go where the embedding is, and the draft with them
        device = target_model.get_input_embeddings().weight.device
        if draft is not None:
            report(f"loading the draft {draft.label}", 0.55)
            draft_model = load_the_draft(device=device)
    report("warming up", 0.8)
    warm_up(target_model, device)
    warm_up(draft_model, device)
    report("models loaded", 1.0)

    names = pair_names(target, draft, device=device, dtype=dtype, shard=shard, quantized=quantize, prepacked=prepacked)
    names["precision"] = precision.name if precision is not None else names["dtype"]  # the target's weights
    names["attention"] = "row-invariant" if is_row_invariant(target_model) else "transformers"  # a trace says which
    if draft_model is not None and spec.draft_vocabulary is not None:
        names["draft_vocabulary"] = restrict_draft(draft_model, draft, tokenizer, spec.draft_vocabulary)
    return ModelPair(target_model, draft_model, tokenizer, device, dtype, spec, names)


def read_configs(
    sources: tuple[Source, Source | None],
    device: torch.device,
    precision: Precision | None,
    quantize: bool,
    allow_code: bool,
) -> dict[str, Any]:
    """The sources' configs, by role; on the CPU, the memory the pair will take checked against what is available
    (check_memory) before any weights are read. A GGUF's config is slow to read: on the CPU it is skipped
    (docs/notes/2026-12-bench-and-loading.md, "Loading: GGUF configs"), and so is the check."""
    wanted = [s for s in sources if s is not None]
    configs = {s.role: load_config(s, allow_code) for s in wanted if s.gguf_file is None or device.type == "cuda"}
    if precision is not None and len(configs) == len(wanted):
        check_memory(configs, precision, quantize, allow_code)
    return configs


def load_target(
    target: Source,
    config: Any | None,
    device: torch.device,
    precision: Precision | None,
    allow_code: bool,
    shard: bool,
    spec: PairSpec,
) -> tuple[Any, int]:
    """The target p and how many of its Linear layers were prepacked. The built-in one on the CPU streams in,
    converted as it loads; others load with from_pretrained and are converted after (int8, or prepacked)."""
    if precision is not None and target.kind == "builtin":
        model = load_streamed(Path(target.path), precision, draft=False, quantize=False, prepack=spec.prepack_target)
        return model, getattr(model, "_specviz_prepacked", 0)
    model = load_model(target, config, device, compute_dtype(device, precision), allow_code, shard)
    if precision is not None and precision.name == "int8":
        replace_linears(model, lambda linear: Int8Linear(linear.weight.detach(), linear.bias))
        return model, 0
    native = precision is None or precision.name == "fp32" or native_bfloat16(device)  # oneDNN packs bf16 natively
    if spec.prepack_target and not shard and native:  # a no-op off CPU or without oneDNN
        return model, prepack_linears(model, dtype=compute_dtype(device, precision))
    return model, 0


def replace_linears(model: Any, convert: Any) -> int:
    """Replace every nn.Linear of model with convert(it), one at a time (each original freed as it goes)."""
    names = [name for name, module in model.named_modules() if type(module) is torch.nn.Linear]
    for name in names:
        model.set_submodule(name, convert(model.get_submodule(name)))
    return len(names)


def pair_names(
    target: Source,
    draft: Source | None,
    *,
    device: torch.device,
    dtype: torch.dtype,
    shard: bool,
    quantized: bool,
    prepacked: int,
) -> dict[str, str]:
    """What a page and a trace show of the pair: names and how it runs, never the models themselves."""
    return {
        "target": target.label,
        "draft": draft.label if draft is not None else "none (n-gram drafter)",
        "device": f"{device} (device_map=auto)" if shard else str(device),
        "dtype": str(dtype).removeprefix("torch."),
        "draft_quantized": "int8" if quantized else "no",
        "target_kernels": "oneDNN prepacked" if prepacked else "default",
    }


def load_draft(
    draft: Source,
    config: Any | None,
    device: torch.device,
    dtype: torch.dtype,
    allow_code: bool,
    quantize: bool,
    tokenizer: Any,
    report: Progress,
    precision: Precision | None = None,
) -> Any:
    """The draft q, checked against the pair's tokenizer, and its Linear layers quantized to int8 if asked."""
    if precision is not None and draft.kind == "builtin":
        model = load_streamed(Path(draft.path), precision, draft=True, quantize=quantize)
        check_width(model.config, tokenizer, draft)
        set_pad_token(model, tokenizer)
        return model
    model = load_model(draft, config, device, dtype, allow_code, shard=False)
    check_width(model.config, tokenizer, draft)
    set_pad_token(model, tokenizer)
    if quantize:
        report("quantizing the draft to int8", 0.4)
        model = quantize_draft(model)
    return model


def prefetch_weights(sources: list[Source], piece: int = 64 << 20) -> threading.Thread | None:
    """Read the sources' local safetensors files into the page cache in the background, in the order given
    (the order they are used in): from_pretrained only memory-maps them. See specviz.models.prefetch."""
    files = [f for s in sources if s.kind in ("builtin", "dir") for f in sorted(Path(s.path).glob("*.safetensors"))]
    return prefetch_files(files, piece)


def pair_tokenizer(target: Source, draft: Source | None, configs: dict[str, Any], allow_code: bool) -> Any:
    """The target's tokenizer, once the draft is known to share its vocabulary and both can embed it."""
    tokenizer = load_tokenizer(target, allow_code)
    if draft is not None and has_own_tokenizer(draft) and not same_tokenizer_files(target, draft):
        check_vocab(tokenizer, load_tokenizer(draft, allow_code), target, draft)
    for source in (target, draft):
        if source is not None and source.role in configs:
            check_width(configs[source.role], tokenizer, source)
    return tokenizer


def prepare_builtin_sources(
    sources: tuple[Source, Source | None], progress: Progress | None, forms: dict[str, str] | None = None
) -> tuple[tuple[Source, Source | None], Progress]:
    """Give built-in sources their converted directories, converting first if needed (minutes, once).

    Returns the sources and the callback for the rest of the loading: a conversion takes the first
    90% of the caller's bar.
    """
    models = {"target": builtin.TARGET, "draft": builtin.DRAFT}
    wanted = [s for s in sources if s is not None and s.kind == "builtin"]
    forms = forms or {}
    split = 0.9 if any(not builtin.is_converted(models[s.role], form=forms.get(s.role)) for s in wanted) else 0.0
    bar = scaled(progress, 0.0, split)
    dirs = builtin.prepare_models([models[s.role] for s in wanted], bar, forms) if wanted else []
    paths = {s.role: str(d) for s, d in zip(wanted, dirs, strict=True)}
    resolved = tuple(replace(s, path=paths[s.role]) if s is not None and s.role in paths else s for s in sources)
    return (resolved[0], resolved[1]), scaled(progress, split, 1.0 - split)
