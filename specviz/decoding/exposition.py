"""specviz's own counters in the serving engines' Prometheus names (vLLM's spec_decode metrics), so a dashboard made
for a vLLM server reads specviz's measurements too: `python -m specviz bench ... --metrics-out FILE`.

Written by prometheus-client, as a server's /metrics would answer: four counters, each sample with the `_total`
suffix, labelled with the target (`model_name`, as vLLM labels it) and the drafter (`method`, as vLLM's
speculative_config names its methods); the per-position counter adds a `position` label, 0-based as vLLM's.

With a verify-cost curve (the bench's), also the times it measured, as gauges under specviz's own names, so that the
Your server page reading the file costs a round as the bench timed it (no serving engine publishes these):
`specviz_draft_step_seconds`, `specviz_verify_seconds{drafted="g"}` (one target forward over g drafted tokens and the
last committed one; g = 0 is a plain step) and `specviz_timing_info{device_name, dtype, measured_at}` = 1.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .metrics import SpecMetrics

PREFIX = "vllm:spec_decode_"
DRAFTS = PREFIX + "num_drafts"
DRAFT_TOKENS = PREFIX + "num_draft_tokens"
ACCEPTED_TOKENS = PREFIX + "num_accepted_tokens"
PER_POSITION = PREFIX + "num_accepted_tokens_per_pos"
LABELS = ("model_name", "method")
DRAFT_STEP = "specviz_draft_step_seconds"
VERIFY = "specviz_verify_seconds"
TIMING_INFO = "specviz_timing_info"
TIMING_LABELS = ("device_name", "dtype", "measured_at")


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


class _Timing(Collector):
    def __init__(self, curve: Mapping):
        self.curve = curve

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily(TIMING_INFO, "Where and when specviz's bench measured the times below.",
                                 labels=TIMING_LABELS)  # fmt: skip
        info.add_metric([str(self.curve.get(k, "")) for k in TIMING_LABELS], 1)
        yield info
        draft = self.curve.get("draft_step_seconds")
        if draft is not None:
            yield GaugeMetricFamily(DRAFT_STEP, "One draft forward, as specviz's bench timed it.", value=draft)
        verify = GaugeMetricFamily(
            VERIFY, "One target forward over `drafted` drafted tokens (0: a plain step), as specviz's bench timed it.",
            labels=("drafted",),
        )  # fmt: skip
        for drafted, seconds in enumerate(self.curve["target_seconds"]):
            verify.add_metric([str(drafted)], seconds)
        yield verify


def exposition(model_name: str, sets: Mapping[str, SpecMetrics], curve: Mapping | None = None) -> str:
    """Prometheus text exposition of each method's counters (method: the drafter's name), and with a verify-cost
    curve (bench/curve.py's) the times it measured."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Counters(model_name, sets))
    if curve is not None and curve.get("target_seconds"):
        registry.register(_Timing(curve))
    return generate_latest(registry).decode("utf-8")
