"""The CPU precisions and the streamed loading of the built-in pair's forms, on a tiny Qwen2 (no real pair).

Each precision is its own target p, and speculative sampling is exact for any p. Greedy identity with plain decoding
also needs a verify over n tokens to give each token the logits of single steps: the Linear layers do, bit for bit,
in every precision (dynamic int8, the draft's, does not: the negative control); attention is made row-invariant
(tests/models/test_row_invariant.py).
"""

from __future__ import annotations

import pytest
import torch
from helpers.forms import save_form
from safetensors import safe_open
from safetensors.torch import save_file

from specviz.errors import ModelLoadError
from specviz.models import memory
from specviz.models.fastpath import PrepackedLinear, prepack_available, prepack_linears, quantize_draft
from specviz.models.loading import PairSpec, load_pair
from specviz.models.precision import PRECISIONS, Int8Embedding, Int8Linear, UpcastEmbedding, load_streamed
from specviz.models.streaming import Writer, entries, stream
from specviz.models.tiny import tiny_model

VOCAB = 97


@pytest.fixture(scope="module")
def model():
    return tiny_model(VOCAB, seed=3, hidden=64, layers=2)


def test_the_writer_and_the_stream_agree_with_the_safetensors_library(tmp_path):
    tensors = {
        "a": torch.randn(3, 5),
        "b": torch.randn(7).to(torch.bfloat16),
        "c": torch.randint(-128, 127, (4, 4), dtype=torch.int8),
        "d": torch.tensor(0.125, dtype=torch.float64),
        "e": torch.zeros(0, 3),
    }
    writer = Writer(tmp_path / "ours.safetensors")
    for name, tensor in tensors.items():
        writer.add(name, tensor)
    writer.close()
    with safe_open(tmp_path / "ours.safetensors", "pt") as theirs:  # the library reads what we wrote
        assert {name: theirs.get_tensor(name) for name in theirs.keys()}.keys() == tensors.keys()
        for name, tensor in tensors.items():
            assert torch.equal(theirs.get_tensor(name), tensor) and theirs.get_tensor(name).dtype == tensor.dtype
    save_file(tensors, tmp_path / "theirs.safetensors")  # and we read what the library wrote, largest first
    streamed = list(stream([tmp_path / "theirs.safetensors"], first=lambda name: name == "d"))
    assert [name for name, _ in streamed] == ["d", "a", "c", "b", "e"]
    assert all(torch.equal(tensor, tensors[name]) for name, tensor in streamed)
    assert sum(e.nbytes for e in entries(tmp_path / "theirs.safetensors")) == 15 * 4 + 7 * 2 + 16 + 8


def test_a_cut_file_is_refused(tmp_path):
    save_file({"a": torch.randn(100)}, tmp_path / "m.safetensors")
    data = (tmp_path / "m.safetensors").read_bytes()
    (tmp_path / "m.safetensors").write_bytes(data[:-40])
    with pytest.raises(ValueError, match="cut short"):
        list(stream([tmp_path / "m.safetensors"]))


@pytest.mark.parametrize("name", ["fp32", "bf16", "int8"])
def test_streamed_target_in_each_precision(model, tmp_path, name):
    """fp32 streams to the same prepacked model as from_pretrained + prepack (bit-identical logits); bf16 and int8
    get their own layers and stay near it."""
    precision = PRECISIONS[name]
    form = "float32" if name == "fp32" else "bfloat16"
    loaded = load_streamed(save_form(model, tmp_path / form, form), precision, draft=False, quantize=False)
    ids = torch.randint(1, VOCAB, (1, 12))
    reference_model = tiny_model(VOCAB, seed=3, hidden=64, layers=2)
    prepack_linears(reference_model)  # what load_pair does to a float32 target from_pretrained loads
    with torch.inference_mode():
        reference = reference_model(ids).logits
        logits = loaded(ids).logits.float()
    if name == "fp32":
        assert torch.equal(logits, reference)
    else:
        p, q = torch.log_softmax(reference, -1), torch.log_softmax(logits, -1)
        assert (p.exp() * (p - q)).sum(-1).mean() < 0.02
    kinds = {type(m) for m in loaded.modules()}
    assert torch.nn.Linear not in kinds or not prepack_available()
    if name == "int8":
        assert Int8Linear in kinds and Int8Embedding in kinds
    elif prepack_available():
        assert PrepackedLinear in kinds


def test_without_prepacking_the_streamed_target_keeps_plain_linear_layers(model, tmp_path):
    """The bench's --no-prepack (PairSpec.prepack_target=False) reaches the streamed built-in target too."""
    folder = save_form(model, tmp_path / "float32", "float32")
    plain = load_streamed(folder, PRECISIONS["fp32"], draft=False, quantize=False, prepack=False)
    assert not any(isinstance(m, PrepackedLinear) for m in plain.modules())
    assert any(type(m) is torch.nn.Linear for m in plain.modules())


def test_the_int8_draft_form_is_torchs_dynamic_quantization_of_the_float32_weights(model, tmp_path):
    draft = load_streamed(save_form(model, tmp_path / "int8", "int8"), PRECISIONS["bf16"], draft=True, quantize=True)
    theirs = quantize_draft(tiny_model(VOCAB, seed=3, hidden=64, layers=2))
    ours_linear = dict(draft.named_modules())["model.layers.0.mlp.up_proj"]
    their_linear = dict(theirs.named_modules())["model.layers.0.mlp.up_proj"]
    assert torch.equal(ours_linear.weight().int_repr(), their_linear.weight().int_repr())
    assert ours_linear.weight().q_scale() == their_linear.weight().q_scale()
    assert isinstance(draft.get_input_embeddings(), UpcastEmbedding)
    ids = torch.randint(1, VOCAB, (1, 9))
    with torch.inference_mode():
        assert draft(ids).logits.dtype == torch.float32


def rows_alone_and_together(layer: torch.nn.Module, rows: int, width: int, dtype: torch.dtype) -> bool:
    """Does a layer give each input row the same output bits alone as among `rows` rows (a verify's shape)?"""
    x = torch.randn(rows, width).to(dtype)
    with torch.inference_mode():
        together = layer(x)
        return all(torch.equal(layer(x[i : i + 1])[0], together[i]) for i in range(rows))


@pytest.mark.parametrize("name", ["fp32", "bf16", "int8"])
def test_each_precisions_linear_layers_give_a_row_the_same_bits_alone_or_in_a_verify(name):
    """Why a verify and single steps agree so closely in every precision: the Linear layers, nearly all of the
    arithmetic, compute each row from its own input row with the same kernel for 1 row as for 9."""
    precision = PRECISIONS[name]
    linear = torch.nn.Linear(256, 320)
    if name == "int8":
        layer = Int8Linear(linear.weight.detach(), linear.bias.detach())
    elif prepack_available():
        layer = PrepackedLinear(linear.to(precision.dtype), batch_hint=8, min_rows=4)
    else:
        pytest.skip("oneDNN's prepacked kernels are not in this torch")
    assert all(rows_alone_and_together(layer, rows, 256, precision.dtype) for rows in (2, 3, 6, 9))


def test_the_dynamic_int8_draft_layer_does_not_and_the_check_sees_it():
    """Negative control: dynamic int8 picks the activations' scale from the whole input, so a row's output depends
    on the other rows of the forward (the draft's q may; the target's p must not)."""
    from specviz.models.fastpath import quantize_linear

    layer = quantize_linear(torch.nn.Linear(256, 320))
    assert not all(rows_alone_and_together(layer, rows, 256, torch.float32) for rows in (2, 3, 6, 9))


def test_a_pair_that_does_not_fit_is_refused_with_both_numbers_and_the_smaller_choice(tmp_path, monkeypatch):
    from specviz.models.tiny import char_tokenizer

    tokenizer = char_tokenizer()
    target = tiny_model(len(tokenizer) + 8, seed=0, hidden=64, layers=2)
    target.save_pretrained(tmp_path / "t")
    tokenizer.save_pretrained(tmp_path / "t")
    spec = PairSpec(target=str(tmp_path / "t"), draft=None, device="cpu", precision="fp32")
    configs = {"target": target.config}
    counts = memory.pair_counts(configs, False)
    need = {n: memory.pair_footprint(counts, PRECISIONS[n], False) for n in PRECISIONS}
    assert need["fp32"] > need["bf16"] > need["int8"] > memory.RUNTIME_BYTES
    monkeypatch.setattr(memory, "available_memory", lambda: need["bf16"])
    with pytest.raises(
        ModelLoadError,
        match=r"in fp32 needs about .* GiB of memory and .* GiB is available now: "
        r"choose precision bf16",
    ):
        load_pair(spec)
    monkeypatch.setattr(memory, "available_memory", lambda: need["int8"] - 1)
    with pytest.raises(ModelLoadError, match="no smaller precision fits either"):
        load_pair(spec)
    monkeypatch.setattr(memory, "available_memory", lambda: need["fp32"])
    assert load_pair(spec).names["precision"] == "fp32"  # exactly enough is enough


def test_a_training_that_would_not_fit_is_refused_before_it_starts(monkeypatch):
    from dataclasses import replace

    from specviz.training import memory as training_memory
    from specviz.training.features import TrainSettings
    from specviz.training.train import TrainError

    model = tiny_model(VOCAB, seed=0, hidden=64, layers=2)
    settings = TrainSettings()
    need = training_memory.training_bytes(model, settings, "eagle")
    smallest = training_memory.training_bytes(model, replace(training_memory.SMALLEST, rows=settings.rows), "eagle")
    assert need > smallest > training_memory.OVERHEAD
    monkeypatch.setattr(training_memory, "available_memory", lambda: smallest)
    with pytest.raises(TrainError, match=r"needs about .* GiB more memory and .* GiB is available: the smallest"):
        training_memory.check_training_memory(model, settings, "eagle")
    monkeypatch.setattr(training_memory, "available_memory", lambda: smallest - 1)
    with pytest.raises(TrainError, match="even the smallest setting would not fit"):
        training_memory.check_training_memory(model, settings, "eagle")
    monkeypatch.setattr(training_memory, "available_memory", lambda: need)
    training_memory.check_training_memory(model, settings, "eagle")  # exactly enough is enough
