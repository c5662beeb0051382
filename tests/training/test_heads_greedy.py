"""The heads' self-distillation data: the target's own greedy continuations, decoded in left-padded batches."""

import os
from dataclasses import replace

import pytest
import torch

from specviz.drafters.heads import MedusaHeads
from specviz.models.fastpath import low_precision_copy, native_bfloat16
from specviz.models.tiny import tiny_pair
from specviz.training.greedy import (
    collection_dtype,
    greedy_features,
    greedy_rows,
    greedy_split,
    snippets,
    training_prompts,
    writing_tasks,
)
from specviz.training.train import IGNORE, TrainSettings, accuracy, split_files, train_medusa

PROMPTS = [[1, 2, 3, 4, 5], [7, 8], [3]]  # unequal lengths: the batch pads two of them on the left


def one_row_greedy(model, prompt: list[int], steps: int) -> tuple[list[int], list[torch.Tensor], list[int]]:
    """Greedy decoding of one prompt with full forwards, no cache and no padding: the reference."""
    ids, fed, hidden, guesses = list(prompt), [], [], []
    for _ in range(steps):
        state = model.base_model(torch.tensor([ids])).last_hidden_state[0, -1]
        guess = int(model.get_output_embeddings()(state).argmax())
        fed.append(ids[-1])
        hidden.append(state)
        guesses.append(guess)
        ids.append(guess)
    return fed, hidden, guesses


def test_batched_rows_are_each_prompts_own_greedy_decoding():
    pair = tiny_pair(seed=4)
    rows = greedy_rows(pair.target, PROMPTS, 8, frozenset())
    for prompt, (fed, hidden, guesses) in zip(PROMPTS, rows, strict=True):
        want_fed, want_hidden, want_guesses = one_row_greedy(pair.target, prompt, 8)
        assert fed == want_fed and guesses == want_guesses
        assert fed[1:] == guesses[:-1]  # the text is the target's own: each fed token is the previous argmax
        torch.testing.assert_close(hidden, torch.stack(want_hidden), atol=1e-4, rtol=1e-4)


def test_a_row_ends_after_its_first_stop_token_and_the_others_go_on():
    pair = tiny_pair(seed=4)
    _, _, guesses = one_row_greedy(pair.target, PROMPTS[0], 8)
    stop = guesses[3]
    rows = greedy_rows(pair.target, PROMPTS, 8, frozenset({stop}))
    first = guesses.index(stop)
    assert rows[0][2] == guesses[: first + 1] and len(rows[0][0]) == first + 1
    for prompt, (fed, _, row_guesses) in zip(PROMPTS[1:], rows[1:], strict=True):
        _, _, want = one_row_greedy(pair.target, prompt, 8)
        cut = next((i + 1 for i, g in enumerate(want) if g == stop), len(want))
        assert row_guesses == want[:cut] and len(fed) == cut


def test_labels_are_the_guesses_k_positions_on_within_each_row():
    pair = tiny_pair(seed=4)
    features = greedy_features(pair.target, PROMPTS, 3, 10**6, 6, 2, frozenset(), lambda m, f: None)
    assert features.lengths == (6, 6, 6) and features.hidden.shape == (18, pair.target.config.hidden_size)
    start = 0
    for (_, _, guesses), n in zip(greedy_rows(pair.target, PROMPTS, 6, frozenset()), features.lengths, strict=True):
        labels = features.labels[start : start + n]
        for k in range(1, 4):
            assert labels[: n - k, k - 1].tolist() == guesses[k:]
            assert (labels[n - k :, k - 1] == IGNORE).all()
        start += n


def test_collection_stops_once_it_has_the_tokens_asked_for():
    pair = tiny_pair(seed=4)
    features = greedy_features(pair.target, PROMPTS * 4, 2, 10, 6, 2, frozenset(), lambda m, f: None)
    assert features.lengths == (6, 6)  # two rows of 6 reach 10; the other ten prompts are never decoded


def test_prompts_ask_about_each_def_or_class_and_to_write_the_documented_functions(tmp_path):
    path = tmp_path / "shapes.py"
    body = '    """The area of a circle of radius r, in square units of r."""\n    return math.pi * r**2\n\n\n'
    path.write_text(
        "import math\n\n\n"
        + "".join(f"def area_{i}(r, *, unit=1):\n{body}" for i in range(5))
        + 'def _hidden(x):\n    """A private helper that nobody is asked to write."""\n\n\n'
        + 'class Box:\n    def area(self):\n        """A method: only top-level functions are asked for."""\n\n\n'
        + "def f(): pass\n"
    )
    found = snippets(path)
    assert sum(s.startswith("def area_") for s in found) == 5 and not any(s.startswith("def f()") for s in found)
    tasks = writing_tasks(path)
    assert sorted(tasks) == [
        f"Write a Python function `area_{i}(r, *, unit=1)`. The area of a circle of radius r, in square units of r."
        for i in range(5)
    ]
    pair = tiny_pair(seed=4)
    prompts = training_prompts(pair.tokenizer, [path], 10, seed=0)
    text = [pair.tokenizer.decode(p) for p in prompts]
    assert len(text) == 10  # snippets and the 5 tasks, alternating, cut at 10
    asks, writes = text[0::2], text[1::2]
    assert all("shapes" in t and "```python" in t for t in asks)
    assert len({t.split(" ")[0] for t in asks}) == 4  # four different asks, in turn
    assert all(t.startswith("Write a Python function `area_") for t in writes)
    broken = tmp_path / "broken.py"
    broken.write_text('def (:\n    """A file that does not parse asks for nothing."""\n')
    assert writing_tasks(broken) == []


def test_medusa_trains_on_greedy_continuations(tmp_path):
    """Head 1 on the tiny target's own text: after training it beats the untrained head (the LM head itself)."""
    pair = tiny_pair(seed=5)
    files = []
    for i in range(10):
        path = tmp_path / f"m{i}.py"
        path.write_text("".join(f"def f{j}(x):\n    return x + {j}\n\n" for j in range(12)))
        files.append(path)
    settings = TrainSettings(
        heads=2, train_tokens=1200, heldout_tokens=300, new_tokens=40, rows=8, epochs=8, batch=64, learning_rate=1e-2
    )
    width = pair.target.config.vocab_size
    steps = []
    heads, report = train_medusa(pair.target, pair.tokenizer, width, settings, files=files, on_step=steps.append)
    assert report.train_tokens >= 1200 and report.heldout_tokens >= 300
    assert steps[-1].loss < 0.8 * steps[0].loss
    _, heldout_files = split_files(files, settings.seed)
    prompts = training_prompts(pair.tokenizer, heldout_files, 100, settings.seed)
    heldout = greedy_features(pair.target, prompts, 2, 300, 40, 8, frozenset(), lambda m, f: None)
    untrained = MedusaHeads(heads.lm_rows.shape[1], 2, heads.lm_rows, heads.token_ids, width)
    before = accuracy(untrained, heldout, heads.token_ids, top=1)
    assert all(after > b + 0.1 for after, b in zip(report.top1, before, strict=True)), (before, report.top1)


def test_collected_data_is_kept_and_read_back_and_a_bad_file_is_collected_again(tmp_path, monkeypatch):
    from specviz.training import data as heads_data
    from specviz.training import train as heads_train

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    library = tmp_path / "lib"
    library.mkdir()
    for i in range(10):
        (library / f"m{i}.py").write_text("".join(f"def f{j}(x):\n    return x * {j} + {i}\n\n" for j in range(8)))
    monkeypatch.setattr(heads_train, "source_files", lambda root=None: sorted(library.glob("*.py")))
    pair = tiny_pair(seed=5)
    settings = TrainSettings(heads=2, train_tokens=200, heldout_tokens=60, new_tokens=20, rows=8)
    calls = []
    real = heads_train.collect_greedy
    monkeypatch.setattr(heads_train, "collect_greedy", lambda *a, **k: calls.append(1) or real(*a, **k))

    def collect(settings=settings):
        return heads_train.collect_both(pair.target, pair.tokenizer, settings, None, lambda m, f: None)

    train, heldout, seconds = collect()
    path = heads_data.data_path(heads_data.data_key(pair.target, settings))
    assert path.is_file() and len(calls) == 1 and len(train.ids) >= 200 and len(heldout.ids) >= 60
    again, heldout_again, seconds_again = collect()
    assert len(calls) == 1 and seconds_again == pytest.approx(seconds, abs=0.05)  # read back, not collected
    torch.testing.assert_close(again.hidden, train.hidden)
    assert again.lengths == train.lengths and torch.equal(again.labels, train.labels)
    assert torch.equal(heldout_again.ids, heldout.ids)

    collect(replace(settings, epochs=9, learning_rate=0.5))  # training-only settings: the same data
    assert len(calls) == 1
    # fewer heads, or up to the default 4 (the EAGLE head reads the first column): the same collection, sliced
    fewer, _, _ = collect(replace(settings, heads=1))
    wider, _, _ = collect(replace(settings, heads=4))
    assert len(calls) == 1 and torch.equal(fewer.labels, train.labels[:, :1]) and wider.labels.shape[1] == 4
    assert torch.equal(wider.labels[:, :2], train.labels)
    collect(replace(settings, heads=5))  # more label columns than the collection has: collected again
    assert len(calls) == 2
    calls.pop()
    collect(replace(settings, new_tokens=24))  # another collection: another file
    assert len(calls) == 2

    path.write_bytes(path.read_bytes()[:100])  # damaged: ignored, collected again, rewritten
    collect()
    assert len(calls) == 3 and heads_data.load_data(path, heads_data.data_key(pair.target, settings)) is not None
    other = tiny_pair(seed=6)  # another target never reads this target's data
    for n in range(heads_data.KEEP + 2):  # older collections beyond the newest KEEP are deleted
        stale = path.with_name(f"data-old{n}.safetensors")
        stale.write_bytes(b"x")
        os.utime(stale, (1_000_000 + n, 1_000_000 + n))
    os.utime(path, (999_999, 999_999))  # older than all of them, but read back next: that counts as new
    collect()
    assert len(calls) == 3 and path.stat().st_mtime > 1_000_100
    collect(replace(settings, new_tokens=28))
    kept = sorted(f.name for f in path.parent.glob("data-*.safetensors"))
    assert len(kept) == heads_data.KEEP and path.name in kept and "data-old0.safetensors" not in kept
    assert heads_data.data_path(heads_data.data_key(other.target, settings)) != path
    monkeypatch.setattr(heads_data, "PROMPT_RECIPE", heads_data.PROMPT_RECIPE + 1)  # answers to other prompts
    assert heads_data.data_path(heads_data.data_key(pair.target, settings)) != path


def test_a_batch_is_filled_in_proportion_to_what_each_list_still_needs():
    from specviz.training.greedy import _shares

    assert _shares([49, 10], [100, 100], 64) == [54, 10]  # scaled up to fill the batch, leftovers to the neediest
    assert _shares([4, 2], [100, 100], 64) == [6, 3]  # half as many again: a small training stays small
    assert _shares([49, 10], [50, 3], 64) == [50, 3]  # never more than a list has left
    assert _shares([200, 1], [300, 300], 64) == [63, 1]  # scaled down, but every list that wants rows gets one
    assert _shares([0, 5], [10, 10], 8) == [0, 8]


def test_a_bfloat16_copy_writes_the_answers_and_the_target_rereads_the_heldout_ones():
    pair = tiny_pair(seed=4)
    copy = low_precision_copy(pair.target, torch.bfloat16)
    train, heldout = greedy_split(copy, [PROMPTS, PROMPTS], 2, (10**6, 10**6), 6, 8, frozenset(), lambda m, f: None)
    assert torch.equal(train.ids, heldout.ids)  # the same prompts: the same text, the copy's
    assert train.lengths == (6, 6, 6)
    plain, reread_rows = greedy_split(
        copy, [PROMPTS, PROMPTS], 2, (10**6, 10**6), 6, 8, frozenset(), lambda m, f: None, reader=pair.target
    )
    assert torch.equal(plain.hidden, train.hidden)  # the training answers stay the copy's own
    assert not torch.allclose(reread_rows.hidden, train.hidden, atol=1e-3)  # bfloat16 states are not the target's
    start = 0
    for prompt, n in zip(PROMPTS, reread_rows.lengths, strict=True):
        fed = reread_rows.ids[start : start + n].tolist()
        with torch.inference_mode():  # the float32 target's own reading of the copy's text, one full forward
            states = pair.target.base_model(torch.tensor([prompt + fed[1:]])).last_hidden_state[0, -n:]
            guesses = pair.target.get_output_embeddings()(states).argmax(-1)
        torch.testing.assert_close(reread_rows.hidden[start : start + n], states, atol=1e-5, rtol=1e-5)
        assert reread_rows.labels[start : start + n - 1, 0].tolist() == guesses[1:].tolist()
        start += n


def test_the_collection_dtype_names_the_data_only_when_it_is_not_the_targets_own():
    from specviz.training.data import data_key

    pair = tiny_pair(seed=4)
    own = data_key(pair.target, TrainSettings(collect_dtype="float32"))
    half = data_key(pair.target, TrainSettings(collect_dtype="bfloat16"))
    assert "collect_dtype" not in own and half["collect_dtype"] == "bfloat16"  # older float32 caches stay valid
    assert collection_dtype(pair.target, TrainSettings(data="text", collect_dtype="bfloat16")) == torch.float32
    auto = collection_dtype(pair.target, TrainSettings())
    assert auto == (torch.bfloat16 if native_bfloat16(torch.device("cpu")) else torch.float32)


def test_a_report_names_a_known_collection_dtype_or_is_refused():
    from specviz.drafters.heads_report import RECORDED, ReportError, check_report, load_report

    recorded = load_report(RECORDED["medusa"])
    assert recorded["collect_dtype"] in ("float32", "bfloat16")
    old = {k: v for k, v in recorded.items() if k != "collect_dtype"}
    assert check_report(old)["collect_dtype"] == "float32"  # reports from before the field
    with pytest.raises(ReportError, match="collect_dtype"):
        check_report({**recorded, "collect_dtype": "int4"})
