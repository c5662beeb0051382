"""Medusa heads: exact decoding on tiny random models, lossless sampling (with a broken variant caught), the training
loop, and the heads file's bad paths."""

import json

import pytest
import torch
from helpers.heads import random_heads
from helpers.lossless import RUNS, chi_square_pair, chi_square_rejects, detected, empirical_joint, exact_joint, outcomes
from safetensors.torch import load_file, save_file

import specviz.drafters.medusa as medusa
from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end
from specviz.drafters.heads import HeadsError, MedusaHeads, forget_heads, use_heads
from specviz.drafters.heads_file import heads_path, load_heads, read_metadata, save_heads, target_fingerprint
from specviz.models.tiny import tiny_pair
from specviz.runs import speculative_generate
from specviz.traces.check import check_trace
from specviz.traces.trace import Trace
from specviz.training.train import (
    IGNORE,
    TrainSettings,
    accuracy,
    collect,
    lm_head_rows,
    medusa_loss,
    reduced_vocabulary,
    split_files,
    to_reduced,
    token_chunks,
    train_medusa,
)


@pytest.fixture(scope="module")
def printable_pair():
    pair = tiny_pair(seed=3)
    use_heads(pair.target, random_heads(pair, count=4, keep=list(range(0, pair.target.config.vocab_size, 2))))
    yield pair
    forget_heads(pair.target)


@pytest.fixture(scope="module")
def small_pair():
    pair = chi_square_pair()
    use_heads(pair.target, random_heads(pair, count=3, keep=[0, 1, 3, 4, 5]))  # id 2 is outside: q = 0 there
    yield pair
    forget_heads(pair.target)


def test_untrained_heads_are_the_lm_head():
    """A zero-initialised block leaves h unchanged: every head's logits are the target's own."""
    pair = tiny_pair(seed=2)
    width = pair.target.config.vocab_size
    ids = torch.arange(width)
    heads = MedusaHeads(pair.target.config.hidden_size, 3, lm_head_rows(pair.target, ids), ids, width)
    hidden = torch.randn(pair.target.config.hidden_size)
    expected = pair.target.get_output_embeddings()(hidden)
    for row in heads.full_logits(hidden):
        torch.testing.assert_close(row, expected, rtol=1e-5, atol=1e-5)


def test_reduced_vocabulary_maps_back_exactly(small_pair):
    heads = random_heads(small_pair, count=2, keep=[1, 4])
    hidden = torch.randn(small_pair.target.config.hidden_size)
    logits = heads.full_logits(hidden)
    assert torch.isinf(logits[:, [0, 2, 3, 5]]).all()
    torch.testing.assert_close(logits[:, [1, 4]], heads(hidden))  # the reduced columns land on their own ids


@pytest.mark.parametrize(
    "gamma, fuse, alternatives", [(1, False, 0), (3, False, 0), (4, True, 0), (6, False, 0), (3, False, 2)]
)
def test_greedy_medusa_equals_the_target(printable_pair, gamma, fuse, alternatives):
    prompt = printable_pair.tokenizer("def add(a, b):\n    return a + b\n\ndef")["input_ids"]
    config = SpecConfig(gamma=gamma, max_new_tokens=40, drafter="medusa", fuse_prompt=fuse, alternatives=alternatives)
    rounds, spec = run_to_end(speculative_generate(printable_pair, prompt, config))
    _, base = run_to_end(autoregressive_generate(printable_pair, prompt, config))
    assert spec.token_ids == base.token_ids
    assert all(len(r.drafted) <= min(gamma, 4) for r in rounds)
    assert sum(len(r.drafted) for r in rounds) > 0  # the heads did draft
    assert all(r.draft_cache_after == 0 for r in rounds)  # no draft model, no draft cache
    assert all(r.draft_forwards == (1 if r.drafted else 0) for r in rounds)  # one pass of the heads per draft
    trace = Trace(config=config, pair={}, prompt="def", prompt_ids=tuple(prompt), rounds=tuple(rounds), summary=spec)
    check_trace(trace)  # the strict loader accepts what the engine records


@pytest.mark.parametrize(
    "config",
    [
        SpecConfig(gamma=3, temperature=1.0, drafter="medusa", max_new_tokens=3),
        SpecConfig(gamma=2, temperature=0.8, top_k=4, drafter="medusa", alternatives=2, max_new_tokens=3),
    ],
    ids=["chain", "with alternatives, top-k 4"],
)
def test_medusa_sampling_is_lossless(small_pair, config):
    exact = exact_joint(small_pair, config)
    counts = empirical_joint(small_pair, config, RUNS)
    rejects, statistic, critical = chi_square_rejects(exact, counts, RUNS)
    assert not rejects, f"chi-square {statistic:.1f} > {critical:.1f}"


def test_recording_another_heads_q_is_detected(small_pair, monkeypatch):
    """The bug: d_k drawn from head k, but checked against head 1's q (as if every head guessed the next token)."""
    original = medusa.probabilities

    def first_row_everywhere(logits, warpers):
        q = original(logits, warpers)
        return q[:1].expand_as(q).clone() if q.shape[0] > 1 else q

    config = SpecConfig(gamma=3, temperature=1.0, drafter="medusa", max_new_tokens=3)
    exact = exact_joint(small_pair, config)
    draw = medusa.sample
    rows = {}

    def sample_true_row(q, generator, greedy):  # draw from the true head-k row, recorded row stays head 1's
        return draw(rows["true"][rows["k"] : rows["k"] + 1], generator, greedy)

    def probabilities_spy(logits, warpers):
        rows["true"], rows["k"] = original(logits, warpers), 0
        return first_row_everywhere(logits, warpers)

    def sample_spy(q, generator, greedy):
        token = sample_true_row(q, generator, greedy)
        rows["k"] += 1
        return token

    monkeypatch.setattr(medusa, "probabilities", probabilities_spy)
    monkeypatch.setattr(medusa, "sample", sample_spy)
    rejects, words = detected(exact, outcomes(small_pair, config))
    assert rejects, f"the biased drafter passed: {words}"


def test_labels_are_the_targets_guesses_k_positions_on():
    pair = tiny_pair(seed=4)
    ids = pair.tokenizer("for i in range(10):\n    print(i)\n")["input_ids"]
    features = collect(pair.target, [ids], count=3, progress=lambda m, f: None)
    guesses = pair.target(torch.tensor([ids])).logits[0].argmax(-1)
    assert features.hidden.shape == (len(ids), pair.target.config.hidden_size)
    for k in range(1, 4):
        assert features.labels[: len(ids) - k, k - 1].tolist() == guesses[k:].tolist()
        assert (features.labels[len(ids) - k :, k - 1] == IGNORE).all()


def test_loss_weights_decay_and_ignore_positions_past_the_chunk():
    logits = torch.zeros(2, 2, 4)
    labels = torch.tensor([[0, IGNORE], [1, IGNORE]])
    uniform = torch.log(torch.tensor(4.0))
    torch.testing.assert_close(medusa_loss(logits, labels), 0.8 * uniform)
    labels = torch.tensor([[0, 1], [1, 2]])
    torch.testing.assert_close(medusa_loss(logits, labels), (0.8 + 0.64) * uniform)


def test_out_of_vocabulary_labels_never_count_as_hits():
    ids = reduced_vocabulary(torch.tensor([[3, 5], [5, IGNORE]]), frozenset({0}))
    assert ids.tolist() == [0, 3, 5]
    reduced = to_reduced(torch.tensor([[3, 7], [IGNORE, 0]]), ids, vocab_width=10)
    assert reduced[0, 0] == 1 and reduced[1, 1] == 0 and reduced[1, 0] == IGNORE
    assert reduced[0, 1] not in (IGNORE, 0, 1, 2)


def test_training_learns_and_the_file_round_trips(tmp_path):
    """On a tiny target, training raises every head's held-out top-1 well above the untrained heads' (which are
    the LM head: they guess the next token, not the one after), and the saved file loads back to the same heads."""
    pair = tiny_pair(seed=5)
    files = []
    for i in range(10):
        path = tmp_path / f"m{i}.py"
        path.write_text("def f(x):\n    return x + 1\n\n" * 60 + f"# file {i}\n")
        files.append(path)
    settings = TrainSettings(
        heads=2, train_tokens=3000, heldout_tokens=600, chunk=128, epochs=6, learning_rate=3e-3, data="text"
    )
    width = pair.target.config.vocab_size
    steps = []
    heads, report = train_medusa(pair.target, pair.tokenizer, width, settings, files=files, on_step=steps.append)
    assert steps and steps[-1].loss < 0.8 * steps[0].loss
    _, heldout_files = split_files(files, settings.seed)
    heldout = collect(pair.target, token_chunks(pair.tokenizer, heldout_files, 600, 128), 2, lambda m, f: None)
    untrained = MedusaHeads(heads.lm_rows.shape[1], 2, heads.lm_rows, heads.token_ids, width)
    before = accuracy(untrained, heldout, heads.token_ids, top=1)
    assert all(after > before_k + 0.1 for after, before_k in zip(report.top1, before, strict=True)), (
        before,
        report.top1,
    )
    assert len(report.curve) == len(steps) and report.train_tokens == 3000
    path = save_heads(heads, target_fingerprint(pair.target), report.to_dict(), tmp_path / "h.safetensors")
    loaded, saved_report = load_heads(pair.target, width, path)
    assert saved_report["top1"] == report.top1
    hidden = torch.randn(pair.target.config.hidden_size)
    torch.testing.assert_close(loaded.full_logits(hidden), heads.full_logits(hidden))


REPORT = {
    "heads": 2,
    "top1": [0.5, 0.2],
    "top5": [0.7, 0.4],
    "train_tokens": 100,
    "heldout_tokens": 20,
    "vocabulary": 30,
    "collect_seconds": 1.0,
    "train_seconds": 2.0,
    "curve": [{"step": 1, "epoch": 1, "loss": 3.5}],
}


@pytest.fixture()
def saved(tmp_path):
    pair = tiny_pair(seed=6)
    heads = random_heads(pair, count=2)
    path = save_heads(heads, target_fingerprint(pair.target), REPORT, tmp_path / "h.safetensors")
    return pair, path


def test_a_missing_file_says_how_to_train(saved, tmp_path):
    pair, _ = saved
    with pytest.raises(HeadsError, match="train-heads"):
        load_heads(pair.target, pair.target.config.vocab_size, tmp_path / "none.safetensors")


def test_a_truncated_file_is_refused(saved):
    pair, path = saved
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(HeadsError, match="damaged"):
        load_heads(pair.target, pair.target.config.vocab_size, path)


def test_changed_bytes_are_refused(saved):
    pair, path = saved
    tensors, metadata = load_file(str(path)), read_metadata(path)
    tensors["blocks.0.bias"] = tensors["blocks.0.bias"] + 1e-3
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(HeadsError, match="checksum"):
        load_heads(pair.target, pair.target.config.vocab_size, path)


def test_heads_of_another_target_are_refused(saved):
    _, path = saved
    other = tiny_pair(seed=7)
    with pytest.raises(HeadsError, match="another target"):
        load_heads(other.target, other.target.config.vocab_size, path)


@pytest.mark.parametrize("key", ["sha256", "report", "format"])
def test_a_file_without_its_description_is_refused(saved, key):
    pair, path = saved
    tensors, metadata = load_file(str(path)), read_metadata(path)
    metadata.pop(key)
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(HeadsError):
        load_heads(pair.target, pair.target.config.vocab_size, path)


def test_token_ids_beyond_the_target_are_refused(saved):
    pair, path = saved
    tensors, metadata = load_file(str(path)), read_metadata(path)
    tensors["token_ids"] = tensors["token_ids"] + 1000
    from specviz.drafters.heads_file import tensors_digest

    metadata["sha256"] = tensors_digest(tensors)  # a consistent checksum: the ids themselves must be checked
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(HeadsError, match="token ids"):
        load_heads(pair.target, pair.target.config.vocab_size, path)


def test_without_trained_heads_the_run_says_how_to_train(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    pair = tiny_pair(seed=8)
    assert not heads_path(target_fingerprint(pair.target)).exists()
    with pytest.raises(HeadsError, match="train-heads"):
        run_to_end(speculative_generate(pair, [1, 2, 3], SpecConfig(drafter="medusa", max_new_tokens=4)))


def test_chunks_cover_the_requested_tokens(tmp_path):
    pair = tiny_pair(seed=9)
    path = tmp_path / "a.py"
    path.write_text("x = 1\n" * 200)
    chunks = token_chunks(pair.tokenizer, [path], tokens=500, chunk=128)
    assert sum(map(len, chunks)) == 500 and max(map(len, chunks)) == 128
    json.dumps([len(c) for c in chunks])


def test_the_scaling_script_cuts_whole_answers():
    from scripts.heads_scaling import first_answers
    from specviz.training.features import Features

    lengths = (5, 3, 4, 4)
    n = sum(lengths)
    features = Features(
        torch.arange(n * 2.0).reshape(n, 2), torch.zeros(n, 1, dtype=torch.long), torch.arange(n), lengths
    )
    half = first_answers(features, 2)  # 8 of 16 tokens: the first two answers
    assert half.lengths == (5, 3) and torch.equal(half.ids, torch.arange(8)) and half.hidden.shape == (8, 2)
    assert first_answers(features, 1).lengths == lengths
    assert first_answers(features, 8).lengths == (5,)  # at least one whole answer


def test_the_online_script_grows_the_vocabulary_without_changing_the_heads_on_the_old_one():
    from scripts.heads_online import grown, traffic_hits
    from specviz.drafters.suffix import TrafficStore

    pair = tiny_pair("abcde", seed=1)
    heads = random_heads(pair, count=2, keep=[0, 1, 3])
    same = grown(pair.target, heads, torch.tensor([0, 3, IGNORE]), frozenset())
    assert same is heads  # nothing new in the labels
    bigger = grown(pair.target, heads, torch.tensor([[4, IGNORE], [1, 2]]), frozenset({5}))
    assert bigger.token_ids.tolist() == [0, 1, 2, 3, 4, 5]
    hidden = torch.randn(3, pair.target.config.hidden_size)
    old, new = heads.full_logits(hidden[0]), bigger.full_logits(hidden[0])
    assert torch.allclose(new[:, [0, 1, 3]], old[:, [0, 1, 3]])  # same blocks, same rows: same logits
    assert torch.isfinite(new[:, [2, 4, 5]]).all() and torch.isinf(old[:, [2, 4, 5]]).all()
    store = TrafficStore()
    store.add([7, 1, 2, 3, 1, 2, 3])
    assert traffic_hits(store, frozenset(), [7], [1, 2, 3]) == 1.0  # each next token is the stored continuation
    assert traffic_hits(TrafficStore(), frozenset(), [7], [1, 2, 3]) == 0.0  # nothing to match: no proposal
