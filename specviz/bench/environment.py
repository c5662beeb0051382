"""What the benchmark records about where it ran: peak memory per method, the device, the versions."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import resource
import sys
from pathlib import Path
from typing import Any

import torch


class PeakMemory:
    """Peak resident memory of this process (and peak GPU memory) over a stretch of code.

    Linux: writing 5 to /proc/self/clear_refs resets the peak (VmHWM), so each method gets its own;
    elsewhere ru_maxrss is the peak since the process started (flagged as not per method).
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.loading_peak = self._vm_hwm()  # the process's peak so far (loading the pair), before any reset
        self.per_method = self._can_reset()
        self.highest = self.loading_peak or 0

    def process_peak(self) -> int | None:
        """The process's high-water mark from its start (loading included): the larger of the peak before the
        first reset and every stretch's since (None where /proc cannot tell)."""
        return self.highest or None

    @staticmethod
    def _can_reset() -> bool:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            return PeakMemory._vm_hwm() is not None
        except OSError:
            return False

    @staticmethod
    def _vm_hwm() -> int | None:
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def reset(self) -> None:
        if self.per_method:
            Path("/proc/self/clear_refs").write_text("5")
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def read(self) -> dict[str, int | None]:
        rss = self._vm_hwm() if self.per_method else None
        self.highest = max(self.highest, rss or 0)
        if rss is None:
            scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
        gpu = torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else None
        return {"peak_rss_bytes": rss, "peak_gpu_bytes": gpu}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from specviz.models.fastpath import cpu_description

    return f"{cpu_description()[0]} ({os.cpu_count()} CPUs)"


def environment(pair) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers_version(),
        "device": str(pair.device),
        "device_name": device_name(pair.device),
        "threads": torch.get_num_threads(),
        "load_average": _load_average(),
        "argv": sys.argv,
    }


def _load_average() -> list[float] | None:
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def now() -> str:
    return _dt.datetime.now().isoformat(timespec="seconds")


def is_prepacked(model) -> bool:
    from specviz.models.fastpath import is_prepacked as check

    return check(model)
