"""The chi-square check behind every lossless test: the first two tokens of many seeded speculative runs against the
target's exact joint distribution P(t1, t2 | prompt), enumerated over a tiny vocabulary."""

import math
from collections.abc import Generator, Iterable, Iterator
from dataclasses import replace

import torch

from specviz.decoding.config import SpecConfig
from specviz.decoding.events import Event, RoundEvent, RunSummary
from specviz.decoding.sampling import build_warpers, probabilities
from specviz.models.tiny import tiny_pair
from specviz.runs import speculative_generate

PROMPT = [1, 2, 3, 1, 2, 3, 1, 2]  # repeats, so the n-gram drafter has something to propose
RUNS = 2000
LOOK = 250  # a negative control tests after every LOOK runs and stops at its first rejection (detected)


def chi_square_pair(layers: int = 1):
    """The pair the chi-squares sample: a vocabulary of 6, a draft far from the target (noise 0.6), one layer. The
    chi-squares test the rule (what is drawn, kept and resampled), which the depth does not change; one layer makes a
    run about 40% cheaper (transformers' per-layer overhead is most of a tiny forward). The greedy tests and the
    caches' tests run the two-layer tiny_pair, and so does a control not caught on one layer (with its positive)."""
    return tiny_pair("abcde", seed=1, noise=0.6, layers=layers)


@torch.inference_mode()
def exact_joint(pair, config: SpecConfig) -> dict[tuple[int, int], float]:
    """P(t1, t2 | prompt) = p(t1 | prompt) p(t2 | prompt, t1) under the same transform."""
    warpers = build_warpers(config)
    logits = pair.target(torch.tensor([PROMPT])).logits[0, -1:]
    first = probabilities(logits, warpers)[0]
    joint = {}
    for t1 in range(first.shape[0]):
        if first[t1] == 0:
            continue
        second = probabilities(pair.target(torch.tensor([PROMPT + [t1]])).logits[0, -1:], warpers)[0]
        for t2 in range(second.shape[0]):
            if second[t2] > 0:
                joint[(t1, t2)] = float(first[t1] * second[t2])
    return joint


def first_two_tokens(events: Generator[Event, None, None]) -> tuple[tuple[int, ...], list[RoundEvent]]:
    """A run's first two committed tokens, and its rounds up to the one that committed the second. The generator is
    closed there: its later rounds cannot change tokens already committed (the same seed gives the same first two
    tokens as the run to its end), so running them would only cost time."""
    tokens: list[int] = []
    rounds: list[RoundEvent] = []
    for event in events:
        if isinstance(event, RunSummary):  # the run ended before its second token
            return tuple(event.token_ids[:2]), rounds
        rounds.append(event)
        tokens.extend(event.appended)
        if len(tokens) >= 2:
            break
    events.close()
    return tuple(tokens[:2]), rounds


def outcomes(pair, config: SpecConfig, runs: int = RUNS) -> Iterator[tuple[int, ...]]:
    """The first two tokens of the runs seeded 0, 1, ..., runs - 1, one at a time (a caller may stop early)."""
    for seed in range(runs):
        key, _ = first_two_tokens(speculative_generate(pair, PROMPT, replace(config, seed=seed)))
        yield key


def empirical_joint(pair, config: SpecConfig, runs: int) -> dict[tuple[int, int], int]:
    counts: dict[tuple[int, int], int] = {}
    for key in outcomes(pair, config, runs):
        counts[key] = counts.get(key, 0) + 1
    return counts


def detected(exact: dict, keys: Iterable[tuple[int, ...]], runs: int = RUNS, look: int = LOOK) -> tuple[bool, str]:
    """A negative control's chi-square: the test after every `look` outcomes, up to `runs`, stopping at the first
    rejection. A broken variant is caught in the first few hundred runs, so its control costs a fraction of a full
    test; one that is never caught has had all `runs` (the positive tests' power). With runs / look looks at alpha =
    0.001, a correct engine would be called broken with probability at most 0.008 (Bonferroni): the control could
    then pass by chance that often, never fail by it. Returns (rejects, words for the assertion's message)."""
    counts: dict[tuple[int, ...], int] = {}
    n = 0
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
        n += 1
        if n % look == 0 or n == runs:
            rejects, statistic, critical = chi_square_rejects(exact, counts, n)
            if rejects or n >= runs:
                break
    else:
        rejects, statistic, critical = chi_square_rejects(exact, counts, n)
    relation = ">" if rejects else "<="
    return rejects, f"chi-square {statistic:.1f} {relation} {critical:.1f} after {n} runs"


def chi_square_rejects(exact: dict, counts: dict, runs: int, alpha_z: float = 3.09) -> tuple[bool, float, float]:
    """Pearson's chi-square with cells of expected count < 5 pooled; critical value at alpha = 0.001
    (Wilson-Hilferty approximation of the chi-square quantile). Returns (rejects, statistic, critical)."""
    cells, pooled_expected, pooled_observed = [], 0.0, 0
    for key, prob in exact.items():
        expected = prob * runs
        if expected < 5:
            pooled_expected += expected
            pooled_observed += counts.get(key, 0)
        else:
            cells.append((expected, counts.get(key, 0)))
    impossible = sum(n for key, n in counts.items() if key not in exact)
    if impossible:
        return True, math.inf, 0.0  # an outcome the target can never produce
    if pooled_expected > 0:
        cells.append((pooled_expected, pooled_observed))
    statistic = sum((obs - exp) ** 2 / exp for exp, obs in cells)
    df = len(cells) - 1
    critical = df * (1 - 2 / (9 * df) + alpha_z * math.sqrt(2 / (9 * df))) ** 3
    return statistic > critical, statistic, critical
