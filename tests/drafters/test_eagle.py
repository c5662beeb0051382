"""The EAGLE head: exact decoding on tiny random models, lossless sampling (a broken variant caught), its cache kept
on the target's true features, training on a tiny target, and its file."""

import pytest
import torch
from helpers.heads import random_head
from helpers.lossless import RUNS, chi_square_pair, chi_square_rejects, detected, empirical_joint, exact_joint, outcomes

import specviz.drafters.eagle as eagle
from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end
from specviz.drafters.heads import HeadsError, forget_heads, use_heads
from specviz.drafters.heads_file import load_heads, save_heads, target_fingerprint
from specviz.models.tiny import tiny_pair
from specviz.runs import speculative_generate
from specviz.traces.check import check_trace
from specviz.traces.trace import Trace
from specviz.training.eagle_train import train_eagle
from specviz.training.train import TrainSettings


@pytest.fixture(scope="module")
def printable_pair():
    pair = tiny_pair(seed=11)
    use_heads(pair.target, random_head(pair, keep=list(range(0, pair.target.config.vocab_size, 3))))
    yield pair
    forget_heads(pair.target)


@pytest.fixture(scope="module")
def small_pair():
    pair = chi_square_pair()
    use_heads(pair.target, random_head(pair, keep=[0, 1, 2, 4, 5]))
    yield pair
    forget_heads(pair.target)


@pytest.mark.parametrize(
    "gamma, fuse, alternatives", [(1, False, 0), (4, False, 0), (5, True, 0), (8, False, 0), (3, False, 2)]
)
def test_greedy_eagle_equals_the_target(printable_pair, gamma, fuse, alternatives):
    prompt = printable_pair.tokenizer("class Stack:\n    def push(self, x):\n")["input_ids"]
    config = SpecConfig(gamma=gamma, max_new_tokens=40, drafter="eagle", fuse_prompt=fuse, alternatives=alternatives)
    rounds, spec = run_to_end(speculative_generate(printable_pair, prompt, config))
    _, base = run_to_end(autoregressive_generate(printable_pair, prompt, config))
    assert spec.token_ids == base.token_ids
    assert sum(len(r.drafted) for r in rounds) > 0
    assert all(len(r.drafted) <= gamma for r in rounds)


def test_the_heads_cache_holds_one_true_entry_per_committed_token_but_the_newest(printable_pair):
    prompt = printable_pair.tokenizer("x = 1\ny = 2\n")["input_ids"]
    config = SpecConfig(gamma=4, max_new_tokens=20, drafter="eagle")
    rounds, summary = run_to_end(speculative_generate(printable_pair, prompt, config))
    committed = len(prompt)
    assert rounds[0].draft_cache_before == len(prompt) - 2
    for r in rounds:
        committed += len(r.appended)
        assert r.draft_cache_after == committed - 1
    trace = Trace(config=config, pair={}, prompt="x", prompt_ids=tuple(prompt), rounds=tuple(rounds), summary=summary)
    check_trace(trace)  # the strict loader accepts what the engine records


@pytest.mark.parametrize(
    "config",
    [
        SpecConfig(gamma=3, temperature=1.0, drafter="eagle", max_new_tokens=3),
        SpecConfig(gamma=2, temperature=0.8, top_p=0.9, drafter="eagle", alternatives=2, max_new_tokens=3),
    ],
    ids=["chain", "with alternatives, top-p 0.9"],
)
def test_eagle_sampling_is_lossless(small_pair, config):
    exact = exact_joint(small_pair, config)
    counts = empirical_joint(small_pair, config, RUNS)
    rejects, statistic, critical = chi_square_rejects(exact, counts, RUNS)
    assert not rejects, f"chi-square {statistic:.1f} > {critical:.1f}"


def test_recording_the_previous_steps_q_is_detected(small_pair, monkeypatch):
    """The bug: d_k drawn from its own q, but checked against the q of the step before (a stale row)."""
    config = SpecConfig(gamma=3, temperature=1.0, drafter="eagle", max_new_tokens=3)
    exact = exact_joint(small_pair, config)
    original = eagle.probabilities
    previous: list[torch.Tensor] = []
    draw = eagle.sample

    def stale(logits, warpers):
        q = original(logits, warpers)
        previous.append(q)
        return q

    def sample_then_swap(q, generator, greedy):
        token = draw(q, generator, greedy)
        if len(previous) >= 2:
            q.copy_(previous[-2])  # what gets recorded is the step before's row
        return token

    monkeypatch.setattr(eagle, "probabilities", stale)
    monkeypatch.setattr(eagle, "sample", sample_then_swap)
    rejects, words = detected(exact, outcomes(small_pair, config))
    assert rejects, f"the biased drafter passed: {words}"


def test_training_learns_the_next_token_and_the_file_round_trips(tmp_path):
    pair = tiny_pair(seed=12)
    files = []
    for i in range(10):
        path = tmp_path / f"m{i}.py"
        path.write_text("def f(x):\n    return x * 2\n\n" * 40 + f"# {i}\n")
        files.append(path)
    settings = TrainSettings(
        heads=1, train_tokens=3000, heldout_tokens=600, chunk=128, epochs=40, learning_rate=3e-3, data="text"
    )
    width = pair.target.config.vocab_size
    steps = []
    head, report = train_eagle(
        pair.target, pair.tokenizer, width, settings, files=files, on_step=steps.append, window=32, intermediate=64
    )
    assert steps[-1].loss < 0.5 * steps[0].loss
    # periodic text: the next token follows from the context. The tiny target's p is flat (top probability
    # 0.04-0.29), so the soft labels tell its argmax apart only faintly: top-1 0.66 after 40 epochs (0.55 after 20)
    assert report.heads == 1 and report.top1[0] > 0.5
    path = save_heads(head, target_fingerprint(pair.target), report.to_dict(), tmp_path / "e.safetensors")
    loaded, _ = load_heads(pair.target, width, path, kind="eagle")
    features = torch.randn(1, 3, pair.target.config.hidden_size)
    embeds = torch.randn(1, 3, pair.target.config.hidden_size)
    torch.testing.assert_close(loaded(embeds, features), head(embeds, features))
    with pytest.raises(HeadsError, match="format"):
        load_heads(pair.target, width, path, kind="medusa")  # an EAGLE file is not Medusa heads


def test_without_a_trained_head_the_run_says_how_to_train(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    pair = tiny_pair(seed=13)
    with pytest.raises(HeadsError, match="--kind eagle"):
        run_to_end(speculative_generate(pair, [1, 2, 3], SpecConfig(drafter="eagle", max_new_tokens=4)))


def test_answers_too_short_for_a_window_are_refused_with_what_to_change():
    from specviz.training.eagle_train import windows
    from specviz.training.features import Features
    from specviz.training.train import TrainError

    pair = tiny_pair()
    n, hidden = 20, pair.target.config.hidden_size
    features = Features(torch.zeros(n, hidden), torch.zeros(n, 1, dtype=torch.long), torch.arange(n), (12, 8))
    with pytest.raises(TrainError, match="windows of 65 tokens, and the longest collected answer has 12"):
        windows(pair.target, features, torch.arange(4), pair.target.config.vocab_size, 64)
    assert len(windows(pair.target, features, torch.arange(4), pair.target.config.vocab_size, 8).labels) == 1


def test_the_token_loss_is_against_the_targets_whole_distribution():
    """EAGLE's soft labels: CE(p, q) with p = softmax(W_lm[S] f) from the true feature f, q from the predicted one.
    Neither a loss against p's argmax alone (hard labels) nor one whose teacher comes from the prediction passes."""
    import torch.nn.functional as F

    from specviz.training.eagle_train import CE_WEIGHT, eagle_loss

    pair = tiny_pair(seed=14)
    head = random_head(pair, keep=[0, 1, 2, 3])
    hidden = pair.target.config.hidden_size
    generator = torch.Generator().manual_seed(0)
    targets, predicted = torch.randn(1, 3, hidden, generator=generator), torch.randn(1, 3, hidden, generator=generator)
    p = torch.softmax(head.reduced_logits(targets), dim=-1)
    log_q = torch.log_softmax(head.reduced_logits(predicted), dim=-1)
    labels = p.argmax(-1)
    labels[0, 2] = -100  # IGNORE: not counted
    head.forward = lambda embeds, inputs, cache=None: predicted
    loss, _ = eagle_loss(head, (torch.zeros(1, 3, hidden), torch.zeros(1, 3, hidden), targets, labels))
    soft = -(p[0, :2] * log_q[0, :2]).sum(-1).mean()
    torch.testing.assert_close(loss, F.smooth_l1_loss(predicted, targets) + CE_WEIGHT * soft)
    hard = F.nll_loss(log_q[0, :2], labels[0, :2])
    self_taught = -(log_q[0, :2].exp() * log_q[0, :2]).sum(-1).mean()  # a teacher from the prediction
    for wrong in (hard, self_taught):
        assert abs(float(soft - wrong)) > 0.01


def test_training_adds_noise_to_the_input_features_only_within_a_width_that_scales_with_them(monkeypatch):
    """EAGLE-1's augmentation: every batch's input features get uniform noise of half-width FEATURE_NOISE times the
    features' standard deviation; the embeddings, the target features and the labels are the data's own."""
    import specviz.training.eagle_train as eagle_train

    pair = tiny_pair(seed=15)
    head = random_head(pair, keep=[0, 1, 2, 3])
    hidden, count, length = pair.target.config.hidden_size, 6, 5
    generator = torch.Generator().manual_seed(1)
    real = eagle_train.eagle_loss
    for scale in (1.0, 10.0):
        data = eagle_train.Windows(
            torch.randn(count, length, hidden, generator=generator),
            scale * torch.randn(count, length, hidden, generator=generator),
            torch.randn(count, length, hidden, generator=generator),
            torch.zeros(count, length, dtype=torch.long),
        )
        seen = []
        monkeypatch.setattr(eagle_train, "eagle_loss", lambda h, batch, seen=seen: seen.append(batch) or real(h, batch))
        settings = TrainSettings(heads=1, epochs=2, learning_rate=1e-3)
        eagle_train.fit_eagle(head, data, settings, lambda m, f: None, batch=3)
        width = eagle_train.FEATURE_NOISE * float(data.inputs.std())
        assert len(seen) == 4 and width > 0
        for embeds, inputs, targets, labels in seen:
            index = [next(i for i in range(count) if torch.equal(data.embeds[i], e)) for e in embeds]
            torch.testing.assert_close(targets, data.targets[index])
            assert torch.equal(labels, data.labels[index])
            noise = inputs - data.inputs[index]
            assert float(noise.abs().max()) <= width * (1 + 1e-5)
            assert float(noise.abs().max()) > 0.9 * width  # uniform over the whole width, not a fraction of it
