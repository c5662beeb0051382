"""train-heads and bench --compare-drafters through the command line, on a tiny local pair."""

import json

import pytest

from specviz.__main__ import main

SMALL = [
    "--heads",
    "2",
    "--tokens",
    "300",
    "--heldout-tokens",
    "64",
    "--data",
    "text",
    "--chunk",
    "64",
    "--epochs",
    "2",
]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_train_then_load_then_compare_drafters(local_pair, cache, tmp_path, capsys, frozen_heap):
    assert main(["train-heads", *local_pair, *SMALL]) == 0
    printed = capsys.readouterr().out
    files = list((cache / "heads").glob("medusa-*.safetensors"))
    assert len(files) == 1 and "trained the Medusa heads on 300 tokens" in printed
    assert "Medusa-1 on Vicuna-7B" in printed and "0.56" in printed

    assert main(["train-heads", *local_pair, *SMALL]) == 0  # the second time: from the cache
    assert "Medusa heads loaded from" in capsys.readouterr().out

    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps({"code": ["abc abc abc", "a b c a b c"]}))
    out = tmp_path / "drafters.json"
    args = ["bench", *local_pair, "--prompts", str(prompts), "--categories", "code", "--raw", "--max-new-tokens", "6"]
    assert main([*args, "--compare-drafters", "model,ngram,medusa", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["drafters"] == ["model", "ngram", "medusa"] and len(doc["runs"]) == 3 * 2
    assert all(row["identical"] for row in doc["runs"])  # greedy: every drafter gives the target's text
    medusa = doc["summary"]["medusa"]
    assert medusa["prompts"] == 2 and medusa["speedup"] > 0
    for name, summary in doc["summary"].items():  # position 1: the share of drafts (rounds that drafted) that kept it
        counts = [r["metrics"] for r in doc["runs"] if r["drafter"] == name]
        assert all(0 <= (c["accepted_per_position"] or [0])[0] <= c["drafts"] <= c["rounds"] for c in counts)
        drafts = sum(c["drafts"] for c in counts)
        want = sum((c["accepted_per_position"] or [0])[0] for c in counts) / drafts if drafts else None
        assert summary["position_1_acceptance"] == want
    assert "mean accept len" in printed and "pos-1 rate" in printed and "medusa" in printed


def test_compare_drafters_refuses_an_unknown_name_before_loading(capsys):
    assert main(["bench", "--target", "/nonexistent/model-dir", "--compare-drafters", "model,eagle2"]) == 2
    assert "--compare-drafters takes names from" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, value", [("--heads", "0"), ("--tokens", "10"), ("--lr", "2"), ("--rows", "257"), ("--new-tokens", "1")]
)
def test_bad_training_settings_are_refused_before_loading(flag, value, capsys):
    assert main(["train-heads", "--target", "/nonexistent/model-dir", flag, value]) == 2
    err = capsys.readouterr().err
    assert flag in err and "nonexistent" not in err


def test_a_damaged_heads_file_is_trained_again(local_pair, cache, capsys):
    assert main(["train-heads", *local_pair, *SMALL]) == 0
    path = next((cache / "heads").glob("medusa-*.safetensors"))
    path.write_bytes(b"not a safetensors file")
    capsys.readouterr()
    assert main(["train-heads", *local_pair, *SMALL]) == 0
    printed = capsys.readouterr().out
    assert "damaged" in printed and "training again" in printed and "trained the Medusa heads" in printed


def test_each_kind_trains_for_its_own_number_of_epochs_unless_told():
    import argparse

    from specviz.training.cli import add_arguments, settings_from
    from specviz.training.features import EAGLE_EPOCHS

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert settings_from(parser.parse_args([])).epochs == 4
    assert settings_from(parser.parse_args(["--kind", "eagle"])).epochs == EAGLE_EPOCHS > 4
    assert settings_from(parser.parse_args(["--kind", "eagle", "--epochs", "2"])).epochs == 2


def test_the_collection_dtype_is_auto_unless_told_and_only_known_ones_are_taken():
    import argparse

    from specviz.training.cli import add_arguments, settings_from

    parser = argparse.ArgumentParser()
    parser.exit_on_error = False
    add_arguments(parser)
    assert settings_from(parser.parse_args([])).collect_dtype == "auto"
    assert settings_from(parser.parse_args(["--collect-dtype", "float32"])).collect_dtype == "float32"
    with pytest.raises(argparse.ArgumentError):
        parser.parse_args(["--collect-dtype", "int8"])
