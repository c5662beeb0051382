"""specviz's own counters in the serving engines' Prometheus names (vLLM's spec_decode metrics), so a dashboard made
for a vLLM server reads specviz's measurements too: `python -m specviz bench ... --metrics-out FILE`.

Written by prometheus-client, as a server's /metrics would answer: four counters, each sample with the `_total`
suffix, labelled with the target (`model_name`, as vLLM labels it) and the drafter (`method`, as vLLM's
speculative_config names its methods); the per-position counter adds a `position` label, 0-based as vLLM's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from .metrics import SpecMetrics

PREFIX = "vllm:spec_decode_"
DRAFTS = PREFIX + "num_drafts"
DRAFT_TOKENS = PREFIX + "num_draft_tokens"
ACCEPTED_TOKENS = PREFIX + "num_accepted_tokens"
PER_POSITION = PREFIX + "num_accepted_tokens_per_pos"
LABELS = ("model_name", "method")


class _Counters(Collector):
    def __init__(self, model_name: str, sets: Mapping[str, SpecMetrics]):
        self.model_name, self.sets = model_name, sets

    def collect(self) -> Iterator[CounterMetricFamily]:
        families = {
            DRAFTS: ("Number of spec decoding drafts (verification steps with a draft).", "drafts"),
            DRAFT_TOKENS: ("Number of draft tokens.", "draft_tokens"),
            ACCEPTED_TOKENS: ("Number of accepted tokens.", "accepted_tokens"),
        }
        for name, (documentation, field) in families.items():
            family = CounterMetricFamily(name, documentation, labels=LABELS)
            for method, m in self.sets.items():
                family.add_metric([self.model_name, method], getattr(m, field))
            yield family
        per_position = CounterMetricFamily(
            PER_POSITION, "Accepted tokens per draft position (0-based).", labels=(*LABELS, "position")
        )
        for method, m in self.sets.items():
            for position, kept in enumerate(m.accepted_per_position):
                per_position.add_metric([self.model_name, method, str(position)], kept)
        yield per_position


def exposition(model_name: str, sets: Mapping[str, SpecMetrics]) -> str:
    """Prometheus text exposition of each method's counters (method: the drafter's name)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Counters(model_name, sets))
    return generate_latest(registry).decode("utf-8")
