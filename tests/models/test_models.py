"""Loading model pairs: sources, refusals with clear messages, the built-in pair's assembly and cache.

Fast tests use tiny random Llama models saved to tmp dirs and fake part packages; the built-in pair itself, once
prepared (python -m specviz prepare), is loaded in tests/real/test_real_pair.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM

from specviz.models import builtin
from specviz.models.loading import (
    ModelLoadError,
    PairSpec,
    allow_remote_code,
    load_pair,
    quantize_draft,
    resolve_device,
    resolve_quantize,
    resolve_source,
)
from specviz.models.tiny import save_tiny

# ---------------------------------------------------------------- tiny local models

LETTERS = string.ascii_lowercase + " "


def test_local_pair_loads_with_names_quantized_draft_and_pad_token(tmp_path):
    target = save_tiny(tmp_path / "target", LETTERS, seed=0)
    draft = save_tiny(tmp_path / "draft", LETTERS, seed=1)
    pair = load_pair(PairSpec(target=str(target), draft=str(draft), device="cpu", precision="fp32"))

    assert pair.names == {
        "target": str(target),
        "draft": str(draft),
        "device": "cpu",
        "dtype": "float32",
        "draft_quantized": "int8",
        "target_kernels": "oneDNN prepacked",
        "precision": "fp32",
        "attention": "row-invariant",
    }
    assert pair.dtype == torch.float32 and pair.device == torch.device("cpu")
    assert not pair.target.training and not pair.draft.training
    assert pair.target.generation_config.pad_token_id == 0  # the tokenizer has none: the EOS stands in
    int8 = torch.ao.nn.quantized.dynamic.Linear
    assert any(isinstance(m, int8) for m in pair.draft.modules())
    assert not any(type(m) is torch.nn.Linear for m in pair.draft.modules())
    assert not any(isinstance(m, int8) for m in pair.target.modules())  # never the target
    ids = torch.tensor([pair.tokenizer("abc")["input_ids"]])
    assert pair.draft(ids).logits.shape == (1, 3, len(LETTERS) + 2)


def test_weights_are_prefetched_in_order_once_only_when_local_and_small_enough(tmp_path, monkeypatch):
    from specviz.models import loading as models
    from specviz.models import prefetch

    target = resolve_source(str(save_tiny(tmp_path / "target", LETTERS)), "target")
    draft = resolve_source(str(save_tiny(tmp_path / "draft", LETTERS)), "draft")
    opened: list[str] = []
    real_open = open

    def spy(file, *args, **kwargs):
        opened.append(Path(file).parent.name)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(prefetch, "open", spy, raising=False)
    for madvise in (True, False):  # MADV_POPULATE_READ, and plain reads where the kernel has none
        opened.clear()
        if not madvise:
            monkeypatch.setattr(prefetch, "_madvise_populate", lambda fd, size, piece: False)
        thread = models.prefetch_weights([draft, target], piece=1024)  # pieces smaller than the files
        assert thread is not None
        thread.join(timeout=30)
        assert opened == ["draft", "target"]  # each safetensors file once, in the order given

    hub = models.Source("target", "org/model", "hub", "org/model", "org/model")
    assert models.prefetch_weights([hub]) is None  # nothing local to read
    monkeypatch.setattr(prefetch, "physical_memory", lambda: 1024)
    assert models.prefetch_weights([draft, target]) is None  # would not stay in the page cache


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or tuple(int(n) for n in re.findall(r"\d+", os.uname().release)[:2]) < (5, 14),
    reason="MADV_POPULATE_READ is Linux 5.14+",
)
def test_madvise_populate_reads_a_file_in_pieces(tmp_path):
    from specviz.models.prefetch import _madvise_populate

    data = tmp_path / "weights.bin"
    data.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    with open(data, "rb") as handle:
        assert _madvise_populate(handle.fileno(), data.stat().st_size, piece=64 << 10)
        assert handle.read() == bytes(range(256)) * 4096


@pytest.mark.parametrize("precision", ["bf16", "int8", "auto"])
def test_a_local_pair_in_each_precision_is_near_the_float32_one(tmp_path, precision):
    """bf16 and int8 targets are other targets (rounded weights): near float32's next-token distributions, with
    their own Linear layers; auto is what this CPU's measurement picked (models/choice.py). The draft stays float32
    int8."""
    from specviz.models.choice import auto_choice
    from specviz.models.fastpath import PrepackedLinear, prepack_available
    from specviz.models.precision import PRECISIONS, Int8Linear

    target = save_tiny(tmp_path / "target", LETTERS, seed=0)
    draft = save_tiny(tmp_path / "draft", LETTERS, seed=1)
    reference = load_pair(PairSpec(target=str(target), draft=str(draft), device="cpu", precision="fp32"))
    pair = load_pair(PairSpec(target=str(target), draft=str(draft), device="cpu", precision=precision))
    chosen = auto_choice().precision if precision == "auto" else precision
    assert pair.names["precision"] == chosen and pair.dtype == PRECISIONS[chosen].dtype
    kind = Int8Linear if chosen == "int8" else (PrepackedLinear if prepack_available() else torch.nn.Linear)
    assert not any(type(m) is torch.nn.Linear for m in pair.target.modules()) or kind is torch.nn.Linear
    assert any(isinstance(m, kind) for m in pair.target.modules())
    ids = torch.tensor([pair.tokenizer("abc abc")["input_ids"]])
    with torch.inference_mode():
        p = torch.log_softmax(reference.target(ids).logits.float(), -1)
        q = torch.log_softmax(pair.target(ids).logits.float(), -1)
        drafted = pair.draft(ids).logits
    kl = (p.exp() * (p - q)).sum(-1).mean()
    assert kl < 0.05  # another target, close to the reference
    assert drafted.dtype == torch.float32  # the int8 draft takes float32 input whatever the target's precision


def test_quantization_can_be_turned_off_and_no_draft_needs_only_the_target(tmp_path):
    target = save_tiny(tmp_path / "target", LETTERS)
    unquantized = load_pair(PairSpec(target=str(target), draft=str(target), device="cpu", quantize_draft=False))
    assert unquantized.names["draft_quantized"] == "no"
    assert any(type(m) is torch.nn.Linear for m in unquantized.draft.modules())

    alone = load_pair(PairSpec(target=str(target), draft=None, device="cpu"))
    assert alone.draft is None and alone.tokenizer is not None
    assert alone.names["draft"].startswith("none") and alone.names["draft_quantized"] == "no"


def test_fast_draft_quantization_matches_torch_quantize_dynamic(tmp_path):
    import copy
    import warnings

    folder = save_tiny(tmp_path / "model", LETTERS)
    model = LlamaForCausalLM.from_pretrained(folder).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    ours = quantize_draft(copy.deepcopy(model))
    ids = torch.tensor([[3, 5, 7, 9, 2]])
    with torch.inference_mode():
        assert torch.equal(ours(ids).logits, reference(ids).logits)
        assert not torch.equal(ours(ids).logits, model(ids).logits)  # it did quantize


def test_vocabulary_mismatch_is_refused_naming_both_models_and_sizes(tmp_path):
    target = save_tiny(tmp_path / "letters", LETTERS)  # 29 tokens
    draft = save_tiny(tmp_path / "digits", "0123456789")  # 12 tokens
    with pytest.raises(ModelLoadError) as caught:
        load_pair(PairSpec(target=str(target), draft=str(draft), device="cpu"))
    message = str(caught.value)
    assert "do not share a vocabulary" in message
    assert str(target) in message and str(draft) in message
    assert "29 vs 12 tokens" in message


def test_same_size_but_reordered_vocabulary_is_refused(tmp_path):
    target = save_tiny(tmp_path / "forward", "abcdef")
    draft = save_tiny(tmp_path / "backward", "fedcba")
    with pytest.raises(ModelLoadError, match=r"8 vs 8 tokens, 6 of them with other ids"):
        load_pair(PairSpec(target=str(target), draft=str(draft), device="cpu"))


def test_draft_without_tokenizer_shares_the_target_one_but_must_embed_every_token(tmp_path):
    target = save_tiny(tmp_path / "target", LETTERS)
    bare = save_tiny(tmp_path / "bare", None, vocab_size=len(LETTERS) + 2 + 3)  # a padded head is fine
    pair = load_pair(PairSpec(target=str(target), draft=str(bare), device="cpu"))
    assert pair.draft.config.vocab_size == len(pair.tokenizer) + 3

    small = save_tiny(tmp_path / "small", None, vocab_size=10)
    with pytest.raises(ModelLoadError, match=r"has 10 embedding rows, fewer than the 29 tokens"):
        load_pair(PairSpec(target=str(target), draft=str(small), device="cpu"))


# ---------------------------------------------------------------- sources, devices, remote code


def test_unknown_hub_id_says_not_found_and_network_needed(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read once at import
    with pytest.raises(ModelLoadError) as caught:
        load_pair(PairSpec(target="specviz-tests/no-such-model", draft=None, device="cpu"))
    message = str(caught.value)
    assert "'specviz-tests/no-such-model' was not found" in message
    assert "not in the Hugging Face cache" in message and "network" in message and "HF_HUB_OFFLINE" in message


def test_paths_that_do_not_exist_are_named(tmp_path):
    with pytest.raises(ModelLoadError, match="directory ./no/such/dir does not exist"):
        resolve_source("./no/such/dir", "target")
    with pytest.raises(ModelLoadError, match="GGUF file .*missing.gguf does not exist"):
        resolve_source(str(tmp_path / "missing.gguf"), "draft")
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(ModelLoadError, match="is a file"):
        resolve_source(str(tmp_path / "weights.bin"), "target")
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    source = resolve_source(str(gguf), "target")
    assert (source.kind, source.path, source.gguf_file) == ("gguf", str(tmp_path), "model.gguf")
    assert resolve_source("Qwen/Qwen2.5-0.5B-Instruct", "draft").kind == "hub"


def test_devices_and_quantization_flags():
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ModelLoadError, match="Unknown device 'tpu'"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        assert resolve_device("auto").type in ("cpu", "mps")
        with pytest.raises(ModelLoadError, match="no CUDA GPU"):
            resolve_device("cuda")
    assert resolve_quantize(None, torch.device("cpu")) is True
    assert resolve_quantize(None, torch.device("cuda", 0)) is False
    with pytest.raises(ModelLoadError, match="CPU only"):
        resolve_quantize(True, torch.device("cuda", 0))


def remote_code_model(folder: Path) -> Path:
    """A config whose model type only its own (untrusted) module defines; importing it leaves a trace."""
    folder.mkdir()
    (folder / "config.json").write_text(
        '{"model_type": "specviz-custom", "auto_map": {"AutoConfig": "configuration_custom.CustomConfig", '
        '"AutoModelForCausalLM": "modeling_custom.CustomModel"}}'
    )
    (folder / "configuration_custom.py").write_text(
        f"open({str(folder / 'EXECUTED')!r}, 'w').write('ran')\n"
        "from transformers import PretrainedConfig\n"
        "class CustomConfig(PretrainedConfig):\n    model_type = 'specviz-custom'\n"
    )
    return folder


def test_remote_code_is_refused_unless_opted_in(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECVIZ_TRUST_REMOTE_CODE", raising=False)
    folder = remote_code_model(tmp_path / "custom")
    with pytest.raises(ModelLoadError) as caught:
        load_pair(PairSpec(target=str(folder), draft=None, device="cpu"))
    assert "SPECVIZ_TRUST_REMOTE_CODE=1" in str(caught.value) and "custom code" in str(caught.value)
    assert not (folder / "EXECUTED").exists()

    assert not allow_remote_code(PairSpec())
    assert allow_remote_code(PairSpec(trust_remote_code=True))
    monkeypatch.setenv("SPECVIZ_TRUST_REMOTE_CODE", "1")
    assert allow_remote_code(PairSpec())


# ---------------------------------------------------------------- built-in parts: assemble and verify


def fake_parts(site: Path, chunks: list[bytes], package: str = "specviz-fake-part") -> builtin.BuiltinModel:
    """Install fake part packages (dist-info + module/data/partNN.bin) under site, like pip would."""
    for index, data in enumerate(chunks, start=1):
        name = f"{package}{index}"
        module = name.replace("-", "_")
        info = site / f"{module}-1.0.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0.0\n")
        (site / module / "data").mkdir(parents=True)
        (site / module / "data" / f"part{index:02d}.bin").write_bytes(data)
    whole = b"".join(chunks)
    return builtin.BuiltinModel(
        role="target",
        name="fake",
        slug="fake-model",
        package=package,
        version="1.0.0",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        part_sha256=tuple(hashlib.sha256(c).hexdigest() for c in chunks),
        converted_size=1000,
    )


CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"second part" * 50, b"the last one"]


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_assemble_concatenates_parts_in_order(site, tmp_path):
    model = fake_parts(site, CHUNKS)
    seen = []
    builtin.assemble(model, tmp_path / "out.gguf", lambda message, fraction: seen.append(fraction))
    assert (tmp_path / "out.gguf").read_bytes() == b"".join(CHUNKS)
    assert seen and seen[-1] == 1.0


def test_corrupt_part_names_the_package_to_reinstall(site, tmp_path):
    model = fake_parts(site, CHUNKS)
    path = site / "specviz_fake_part2" / "data" / "part02.bin"
    path.write_bytes(b"x" + path.read_bytes()[1:])
    with pytest.raises(ModelLoadError) as caught:
        builtin.assemble(model, tmp_path / "out.gguf")
    assert "pip install --force-reinstall specviz-fake-part2==1.0.0" in str(caught.value)
    assert "wrong SHA-256" in str(caught.value)
    assert not (tmp_path / "out.gguf").exists()  # no half file left behind


def test_missing_part_file_or_package_names_the_package(site, tmp_path):
    model = fake_parts(site, CHUNKS)
    (site / "specviz_fake_part3" / "data" / "part03.bin").unlink()
    reinstall = r"missing .*Fix: pip install --force-reinstall specviz-fake-part3==1\.0\.0"
    with pytest.raises(ModelLoadError, match=reinstall):
        builtin.assemble(model, tmp_path / "out.gguf")

    other = fake_parts(site, CHUNKS[:2], package="specviz-short-part")
    longer = builtin.BuiltinModel(**{**other.__dict__, "part_sha256": other.part_sha256 + ("0" * 64,)})
    with pytest.raises(
        ModelLoadError,
        match=r"specviz-short-part3 is not installed.*"
        r"pip install --force-reinstall specviz-short-part3==1\.0\.0",
    ):
        builtin.assemble(longer, tmp_path / "out.gguf")


def test_whole_file_checksum_is_verified_too(site, tmp_path):
    model = fake_parts(site, CHUNKS)
    wrong = builtin.BuiltinModel(**{**model.__dict__, "sha256": "0" * 64})
    with pytest.raises(
        ModelLoadError,
        match=r"does not verify.*pip install --force-reinstall "
        r"specviz-fake-part1==1\.0\.0 specviz-fake-part2==1\.0\.0",
    ):
        builtin.assemble(wrong, tmp_path / "out.gguf")


def test_prepare_is_atomic_and_runs_once(site, tmp_path, monkeypatch):
    model = fake_parts(site, CHUNKS)
    root = tmp_path / "cache"
    calls = []

    def broken(gguf, out, model, progress=None):
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt  # killed mid-conversion

    monkeypatch.setattr(builtin, "convert", broken)
    with pytest.raises(KeyboardInterrupt):
        builtin.prepare_model(model, root)
    assert not builtin.is_converted(model, root) and not builtin.converted_dir(model, root).exists()
    assert [p.name for p in root.iterdir() if not p.name.endswith(".lock")] == []

    def fake_convert(gguf, out, form, stage=None):
        calls.append(gguf.read_bytes() == b"".join(CHUNKS))
        (out / "model.safetensors").write_bytes(b"weights")

    monkeypatch.setattr(builtin, "convert", fake_convert)
    folder = builtin.prepare_model(model, root)
    assert calls == [True] and builtin.is_converted(model, root)
    assert {p.name for p in folder.iterdir()} == {builtin.MARKER, "model.safetensors"}
    assert not list(root.rglob("*.gguf"))  # the .gguf is deleted
    assert builtin.prepare_model(model, root) == folder and calls == [True]  # done: not redone


def fake_convert(calls: list[bool], delay: float = 0.0):
    def convert(gguf, out, form, stage=None):
        calls.append(gguf.read_bytes() == b"".join(CHUNKS))
        time.sleep(delay)
        (out / "model.safetensors").write_bytes(b"weights")

    return convert


@pytest.mark.parametrize(
    "marker",
    [
        {"format": builtin.FORMAT - 1},  # an older conversion: redone
        {"sha256": "0" * 64},  # another model's cache under this name: replaced
        None,  # a damaged marker
    ],
)
def test_a_stale_or_foreign_cache_is_converted_again_and_replaced(site, tmp_path, monkeypatch, marker):
    model = fake_parts(site, CHUNKS)
    root = tmp_path / "cache"
    folder = builtin.converted_dir(model, root)
    folder.mkdir(parents=True)
    (folder / "left-over.bin").write_bytes(b"old")
    good = {"format": builtin.FORMAT, "sha256": model.sha256}
    (folder / builtin.MARKER).write_text("{not json" if marker is None else json.dumps({**good, **marker}))
    assert not builtin.is_converted(model, root)
    calls: list[bool] = []
    monkeypatch.setattr(builtin, "convert", fake_convert(calls))
    assert builtin.prepare_model(model, root) == folder and calls == [True]
    assert builtin.is_converted(model, root)
    assert {p.name for p in folder.iterdir()} == {builtin.MARKER, "model.safetensors"}  # replaced, not merged


def test_too_little_free_space_is_refused_before_any_copying(site, tmp_path, monkeypatch):
    model = fake_parts(site, CHUNKS)
    need = model.size + model.form_size(builtin.default_form(model)) + (256 << 20)
    monkeypatch.setattr(builtin.shutil, "disk_usage", lambda path: shutil_usage(free=need - 1))
    monkeypatch.setattr(builtin, "assemble", lambda *args, **kwargs: pytest.fail("copied with no room"))
    with pytest.raises(
        ModelLoadError,
        match=r"needs 0\.3 GB free in .*, which has 0\.3 GB\. Free some space or "
        r"point SPECVIZ_CACHE at a larger disk",
    ):
        builtin.prepare_model(model, tmp_path / "cache")
    monkeypatch.setattr(builtin.shutil, "disk_usage", lambda path: shutil_usage(free=need))
    builtin.check_free_space(model, tmp_path, builtin.default_form(model))  # exactly enough is enough


def shutil_usage(free: int):
    import shutil

    return shutil._ntuple_diskusage(total=free * 2, used=free, free=free)


def test_two_prepares_at_once_convert_once(site, tmp_path, monkeypatch):
    model = fake_parts(site, CHUNKS)
    root = tmp_path / "cache"
    calls: list[bool] = []
    monkeypatch.setattr(builtin, "convert", fake_convert(calls, delay=0.5))  # the second waits on the lock
    with ThreadPoolExecutor(2) as pool:
        folders = list(pool.map(lambda _: builtin.prepare_model(model, root), range(2)))
    assert folders[0] == folders[1] == builtin.converted_dir(model, root)
    assert calls == [True] and builtin.is_converted(model, root)
    assert [p.name for p in root.iterdir() if p.name.startswith(".tmp-")] == []
