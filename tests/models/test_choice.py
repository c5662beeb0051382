"""auto, measured (models/choice.py): the draft length and speed from the cost model, the choice among the
precisions that fit, the per-CPU cache, and the loader and sidebar following the decision."""

import dataclasses

import pytest
import torch

import specviz.models.choice as choice
from specviz.models.loading import cpu_precision
from specviz.models.tiny import tiny_model

GIB = 2**30


def test_best_gamma_by_hand():
    # a = 0.8, c = 0.25, v(g) = 1 + 0.01 g: tokens per step-time 1.429 (g 1), 1.605 (2), 1.658 (3), 1.648 (4)
    gamma, rate = choice.best_gamma(0.25, 1.08)
    assert gamma == 3 and rate == pytest.approx(2.952 / 1.78, abs=1e-3)
    assert choice.best_gamma(0.0, 1.0)[0] == 16  # free drafts and a free verify: draft as far as allowed
    assert choice.best_gamma(2.0, 1.0)[0] == 1  # a draft dearer than the target: the shortest draft


def timing(name: str, speed: float) -> choice.FormTiming:
    return choice.FormTiming(name, 0.1, 1.1, 0.25, 3, speed)


MEASURED = choice.Measurement("a CPU", "2026-12-07", 2, (timing("fp32", 9.0), timing("bf16", 8.0), timing("int8", 5.0)))


def need(precision: str) -> int:
    from specviz.models.memory import builtin_need
    from specviz.models.precision import PRECISIONS

    return builtin_need(PRECISIONS[precision], quantize=True) + choice.ROOM


def test_the_fastest_that_fits_is_chosen():
    assert choice.choose(MEASURED, free=64 * GIB).precision == "fp32"
    between = need("bf16") + GIB // 2  # bf16 fits, fp32 does not
    assert need("fp32") > between
    assert choice.choose(MEASURED, free=between).precision == "bf16"
    assert choice.choose(MEASURED, free=GIB).precision == "int8"  # nothing fits: the smallest, refused by the load


def test_a_smaller_precision_within_the_margin_is_preferred():
    close = choice.Measurement(
        "a CPU", "2026-12-07", 2, (timing("fp32", 8.6), timing("bf16", 8.0), timing("int8", 5.0))
    )
    assert choice.choose(close, free=64 * GIB).precision == "bf16"  # 7.5% faster is within the 10% margin
    assert choice.choose(MEASURED, free=64 * GIB).precision == "fp32"  # 12.5% faster is not


def test_a_precision_whose_verify_costs_several_steps_is_passed_over():
    steep = dataclasses.replace(timing("int8", 20.0), verify_steps=2.5)  # fastest by the model, a verify of 2.5 steps
    forms = (timing("fp32", 9.0), timing("bf16", 8.0), steep)
    assert choice.choose(choice.Measurement("a CPU", "2026-12-07", 2, forms), free=64 * GIB).precision == "fp32"
    all_steep = tuple(dataclasses.replace(form, verify_steps=3.0) for form in forms)
    assert choice.choose(choice.Measurement("a CPU", "2026-12-07", 2, all_steep), free=64 * GIB).precision == "int8"


def test_a_chooser_blind_to_memory_would_be_caught():
    blind = max(MEASURED.forms, key=lambda form: form.speed)
    assert blind.precision != choice.choose(MEASURED, free=need("bf16") + GIB // 2).precision


TINY = tiny_model(300, seed=0, hidden=64).config


def test_measure_times_every_precision_on_a_real_layer():
    measurement = choice.measure({"target": TINY, "draft": TINY}, ("fp32", "bf16", "int8"))
    assert [form.precision for form in measurement.forms] == ["fp32", "bf16", "int8"]
    for form in measurement.forms:
        assert form.step_seconds > 0 and form.verify_steps > 0 and form.c > 0 and 1 <= form.gamma <= 16
        assert form.speed == pytest.approx(choice.best_gamma(form.c, form.verify_steps)[1] / form.step_seconds)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(choice, "cache_file", lambda: tmp_path / "auto-precision.json")
    monkeypatch.setattr(choice, "measure", lambda configs, precisions: MEASURED)
    monkeypatch.setattr(choice, "builtin_configs", lambda: {})
    choice.measured.cache_clear()
    yield tmp_path / "auto-precision.json"
    choice.measured.cache_clear()


def test_a_quiet_machine_is_timed_once_per_cpu_and_a_busy_one_follows_the_rule(cache, monkeypatch):
    monkeypatch.setattr(choice.os, "getloadavg", lambda: (99.0, 0.0, 0.0))
    assert choice.measured() is None and not cache.exists()  # too busy: nothing timed, nothing kept
    choice.auto_decision.cache_clear()
    monkeypatch.setattr("specviz.models.fastpath.native_bfloat16", lambda device: True)
    assert choice.auto_decision().precision == "bf16" and choice.auto_reason().startswith("auto picked bfloat16 by the")
    choice.auto_decision.cache_clear()
    choice.measured.cache_clear()
    monkeypatch.setattr(choice.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert choice.measured() == MEASURED and cache.exists()
    choice.measured.cache_clear()
    monkeypatch.setattr(choice, "measure", lambda configs, precisions: pytest.fail("measured again"))
    monkeypatch.setattr(choice.os, "getloadavg", lambda: (99.0, 0.0, 0.0))
    assert choice.measured() == MEASURED  # read back, busy or not
    monkeypatch.setattr(choice.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")  # other kernels: another CPU as far as the cache knows
    choice.measured.cache_clear()
    with pytest.raises(pytest.fail.Exception):
        choice.measured()
    choice.auto_decision.cache_clear()


def test_the_loader_and_the_sidebar_follow_the_decision(monkeypatch):
    decision = choice.Decision("fp32", 8 * GIB, MEASURED)  # fp32 timed fastest and fitting
    monkeypatch.setattr(choice, "auto_decision", lambda: decision)
    assert cpu_precision("auto", torch.device("cpu")).name == "fp32"
    assert cpu_precision("int8", torch.device("cpu")).name == "int8"  # a named precision is the user's
    reason = choice.auto_reason()
    assert reason.startswith("auto picked float32")
    assert "1.10 in float32, 1.10 in bfloat16, 1.10 in int8" in reason
    between = dataclasses.replace(decision, precision="bf16", free=need("bf16") + GIB // 2)
    monkeypatch.setattr(choice, "auto_decision", lambda: between)
    assert "; float32 did not fit in the" in choice.auto_reason()
    small = dataclasses.replace(decision, precision="int8", free=GIB)
    monkeypatch.setattr(choice, "auto_decision", lambda: small)
    assert "none fit in the 1.0 GiB then available, and int8 is the smallest" in choice.auto_reason()
