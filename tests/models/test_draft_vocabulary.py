"""A draft restricted to the most frequent ids (models/vocabulary.py): the kept logits are the full head's, every
other id's probability is 0, sampling stays exact, and the ranking is used only with its own tokenizer."""

import copy
import hashlib

import pytest
import torch
from helpers.lossless import RUNS, chi_square_pair, chi_square_rejects, empirical_joint, exact_joint

from specviz.decoding.config import SpecConfig
from specviz.models.fastpath import quantize_linear
from specviz.models.vocabulary import FrequentHead, frequent_ids, kept_rows, load_ranking, restrict_draft_vocabulary


@pytest.mark.parametrize("form", ["float", "int8"])
def test_kept_logits_are_the_full_heads_and_the_rest_are_minus_infinity(form):
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 40, bias=False)
    head = quantize_linear(head) if form == "int8" else head
    kept = torch.tensor([0, 3, 7, 8, 39])
    restricted = FrequentHead(kept_rows(head, kept), kept, 40)
    x = torch.randn(3, 16)
    with torch.inference_mode():
        full, small = head(x), restricted(x)
    assert torch.equal(small[:, kept], full[:, kept])
    others = torch.ones(40, dtype=torch.bool)
    others[kept] = False
    assert torch.isneginf(small[:, others]).all()


def restricted_pair(ids):
    pair = chi_square_pair()
    pair.draft = copy.deepcopy(pair.draft)
    restrict_draft_vocabulary(pair.draft, ids)
    return pair


def test_a_restricted_draft_never_proposes_another_id_and_sampling_stays_exact():
    pair = restricted_pair([0, 1, 2, 3])  # ids 4 and 5 ("d", "e") can never be drafted
    config = SpecConfig(gamma=3, temperature=1.0, max_new_tokens=3)
    exact = exact_joint(pair, config)
    counts = empirical_joint(pair, config, RUNS)
    rejects, statistic, critical = chi_square_rejects(exact, counts, RUNS)
    assert not rejects, f"chi-square {statistic:.1f} > {critical:.1f}"
    assert any(t in (4, 5) for pair_ in counts for t in pair_), "the target's own ids still come out"


def test_the_draft_logits_put_zero_on_ids_left_out():
    pair = restricted_pair([0, 1, 2, 3])
    with torch.inference_mode():
        logits = pair.draft(torch.tensor([[1, 2, 3]])).logits[0, -1]
    assert torch.isneginf(logits[4:]).all() and torch.isfinite(logits[:4]).all()


def test_the_ranking_is_used_only_with_its_own_tokenizer(tmp_path):
    ranking = load_ranking()
    ids = ranking.ids()
    assert len(set(ids)) == len(ids) == 65536 and max(ids) < ranking.vocab_size
    other = tmp_path / "tokenizer.json"
    other.write_text("{}")
    assert frequent_ids(other, 1000, {5}) is None  # another tokenizer: no restriction
    assert hashlib.sha256(other.read_bytes()).hexdigest() != ranking.tokenizer_sha256


def test_the_ranking_keeps_the_most_frequent_ids_and_the_special_ones(tmp_path, monkeypatch):
    import specviz.models.vocabulary as vocabulary

    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    ranking = load_ranking().model_copy(update={"tokenizer_sha256": hashlib.sha256(b"{}").hexdigest()})
    monkeypatch.setattr(vocabulary, "load_ranking", lambda path=None: ranking)
    ids = frequent_ids(tokenizer, 4096, {151643, 151645})
    assert ids == sorted(set(ranking.ids()[:4096]) | {151643, 151645})
    common = [220, 198, 11, 13]  # " ", "\n", ",", "." in Qwen's vocabulary: among the most frequent of any text
    assert set(common) <= set(ranking.ids()[:1024])
