"""The oneDNN prepacked target (specviz.models.fastpath): the same function as the model it replaces, for any rows."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from specviz.models.fastpath import (
    PrepackedLinear,
    is_prepacked,
    low_precision_copy,
    native_bfloat16,
    prepack_available,
    prepack_linears,
    quantize_draft,
)
from specviz.models.tiny import tiny_model

pytestmark = pytest.mark.skipif(not prepack_available(), reason="this torch has no oneDNN linear ops")


def packed_copy(model: nn.Module) -> nn.Module:
    copy = type(model)(model.config).eval()
    copy.load_state_dict(model.state_dict())
    return copy


@pytest.mark.parametrize("tied", [False, True])
def test_prepacked_model_computes_the_same_logits_for_1_to_9_new_tokens(tied):
    model = tiny_model(vocab_size=97, seed=3, hidden=64, layers=2)
    if tied:  # the LM head shares the embedding's weight, as in the built-in pair
        model.config.tie_word_embeddings = True
        model.lm_head.weight = model.model.embed_tokens.weight
    packed = packed_copy(model)
    if tied:
        packed.lm_head.weight = packed.model.embed_tokens.weight
    linears = sum(type(m) is nn.Linear for m in packed.modules())

    assert prepack_linears(packed) == linears and is_prepacked(packed)
    assert not any(type(m) is nn.Linear for m in packed.modules())
    ids = torch.randint(0, 97, (1, 20), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        for rows in range(1, 10):  # a decode step, and verifies over up to 8 drafted tokens (padded below 4)
            expected = model(input_ids=ids[:, : 10 + rows]).logits
            got = packed(input_ids=ids[:, : 10 + rows]).logits
            assert got.shape == expected.shape
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    assert torch.equal(packed.model.embed_tokens.weight, model.model.embed_tokens.weight)


def test_only_linear_layers_of_the_asked_dtype_are_packed():
    quantized = quantize_draft(tiny_model(vocab_size=31, seed=1))
    before = [type(m) for m in quantized.modules()]
    assert prepack_linears(quantized) == 0 and not is_prepacked(quantized)  # int8 layers (the LM head too) stay
    assert [type(m) for m in quantized.modules()] == before
    assert prepack_linears(tiny_model(vocab_size=31, seed=1).to(torch.float64)) == 0
    assert prepack_linears(tiny_model(vocab_size=31, seed=1).to(torch.bfloat16)) == 0  # float32 unless asked


@pytest.mark.skipif(not native_bfloat16(torch.device("cpu")), reason="no native bfloat16 on this CPU")
def test_a_prepacked_bfloat16_model_computes_what_the_unpacked_one_does():
    """The collector of the heads' training answers (heads/train.py): a bfloat16 copy, its weights packed once."""
    model = tiny_model(vocab_size=97, seed=3, hidden=64, layers=2).to(torch.bfloat16)
    packed = packed_copy(model).to(torch.bfloat16)
    linears = sum(type(m) is nn.Linear for m in packed.modules())
    assert prepack_linears(packed, 256, 1, torch.bfloat16) == linears
    ids = torch.randint(0, 97, (6, 20), generator=torch.Generator().manual_seed(0))  # a step of 6 rows, a prompt pass
    with torch.inference_mode():
        for width in (1, 20):
            want = model(input_ids=ids[:, :width]).logits.float()
            got = packed(input_ids=ids[:, :width]).logits.float()
            assert (got - want).norm() / want.norm() < 0.01  # bfloat16 sums in another order: close, not equal
        with pytest.raises(RuntimeError, match="bfloat16"):
            packed.lm_head(torch.zeros(1, 64))  # a float32 input is refused, not silently cast


def test_padding_few_rows_changes_no_row():
    linear = nn.Linear(48, 40)
    packed = PrepackedLinear(linear, batch_hint=8, min_rows=4)
    x = torch.randn(3, 2, 48)  # 6 rows: unpadded
    with torch.inference_mode():
        torch.testing.assert_close(packed(x), linear(x), rtol=1e-5, atol=1e-5)
        for rows in (1, 2, 3):  # padded with zero rows to 4, then cut back
            part = x.reshape(-1, 48)[:rows].reshape(1, rows, 48)
            assert packed(part).shape == (1, rows, 40)
            torch.testing.assert_close(packed(part), linear(part), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("prepacked", [False, True])
def test_a_bfloat16_copy_has_the_models_weights_buffers_and_ties(tied, prepacked):
    model = tiny_model(vocab_size=97, seed=3, hidden=64, layers=2)
    if tied:
        model.config.tie_word_embeddings = True
        model.lm_head.weight = model.model.embed_tokens.weight
    source = packed_copy(model)
    if tied:
        source.lm_head.weight = source.model.embed_tokens.weight
    if prepacked:
        prepack_linears(source)
    copy = low_precision_copy(source, torch.bfloat16)

    assert copy.config is not source.config
    for name, parameter in model.named_parameters():  # every weight, a prepacked one unpacked, rounded once
        assert torch.equal(copy.get_parameter(name), parameter.detach().to(torch.bfloat16)), name
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in copy.parameters())
    for name, buffer in model.named_buffers():
        torch.testing.assert_close(copy.get_buffer(name), buffer)  # the rotary frequencies stay the model's
    assert (copy.lm_head.weight is copy.model.embed_tokens.weight) == tied
    ids = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        want, got = model(input_ids=ids).logits, copy(input_ids=ids).logits.float()
    assert (got - want).norm() / want.norm() < 0.05  # bfloat16: close, not equal
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the source is left as it was


def test_bfloat16_runs_natively_on_a_gpu():
    assert native_bfloat16(torch.device("cuda"))
