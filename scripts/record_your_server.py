"""Write what the Your server page opens on, assets/server/recording_vllm.json: specviz's own recorded runs of the
built-in pair (the Acceptance lab's batch, assets/lab/batch.json: 20 prompts, five categories, gamma 5), counted as
vLLM counts them and written in vLLM's Prometheus names by the same writer as `bench --metrics-out`
(decoding/exposition.py).

Usage: .venv/bin/python -m scripts.record_your_server (no model runs: it reads the recorded traces).

The recording is that text with where and when the runs were made and their speculative seconds, end to end (the
counters count only those runs). It is read back strictly before it is written (server_metrics.recording_from_json).
"""

from __future__ import annotations

import json

from specviz import ASSETS
from specviz.decoding.exposition import exposition
from specviz.decoding.metrics import SpecMetrics
from specviz.lessons.recorded import lab_from_json
from specviz.lessons.server_metrics import RECORDING_FILE, RECORDING_FORMAT, recording_from_json

LAB = ASSETS / "lab" / "batch.json"


def recording() -> str:
    lab = lab_from_json(LAB.read_bytes())
    traces = [run.trace for run in lab.runs]
    counts = sum((SpecMetrics.from_events(t.rounds) for t in traces), SpecMetrics())
    pair = traces[0].pair
    document = {
        "format": RECORDING_FORMAT,
        "version": 1,
        "recorded": {
            "machine": lab.recorded.machine,
            "precision": pair.get("dtype", "?"),
            "device": pair.get("device", "cpu"),
            "when": lab.recorded.when,
            "by": f"python -m scripts.record_your_server, from {LAB.relative_to(ASSETS.parent)} ({lab.recorded.by})",
        },
        "seconds": sum(t.summary.seconds for t in traces),
        "text": exposition(pair["target"], {traces[0].config.drafter: counts}),
    }
    text = json.dumps(document, indent=1) + "\n"
    recording_from_json(text)  # refuses what the page would refuse
    return text


if __name__ == "__main__":
    RECORDING_FILE.parent.mkdir(parents=True, exist_ok=True)
    RECORDING_FILE.write_text(recording(), encoding="utf-8")
    print(f"wrote {RECORDING_FILE}")
