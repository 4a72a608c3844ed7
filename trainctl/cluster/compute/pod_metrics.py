"""Usage samples to ``metrics.k8s.io/v1beta1`` PodMetrics and NodeMetrics, as metrics-server
reports them: CPU as a rate in nanocores over a window ("123456n"), memory as the working
set in KiB ("2048Ki").

Pure: the kubelet records a :class:`Sample` per container (and per node) every few seconds
with the time it took it; :class:`UsageHistory` keeps the recent ones and yields the pair a
rate is computed over.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Generic, Hashable, Mapping, Optional, TypeVar

from trainctl.cluster.compute.accounting import Usage

API_VERSION = "metrics.k8s.io/v1beta1"
# metrics-server's default --metric-resolution: the window a rate is taken over.
DEFAULT_WINDOW_SECONDS = 15.0

Key = TypeVar("Key", bound=Hashable)


@dataclass(frozen=True)
class Sample:
    """A cumulative usage reading and when it was taken (seconds since the epoch)."""

    time: float
    usage: Usage


@dataclass(frozen=True)
class Rate:
    """Usage over the window between two samples."""

    nanocores: int
    memory_bytes: int
    timestamp: float  # of the later sample
    window_seconds: float

    @classmethod
    def between(cls, earlier: Sample, later: Sample) -> "Rate":
        elapsed = later.time - earlier.time
        if elapsed <= 0:
            raise ValueError("a rate needs two samples taken at different times")
        # A cumulative counter that went back (a restarted process tree) counts as idle.
        used = max(0.0, later.usage.cpu_seconds - earlier.usage.cpu_seconds)
        return cls(nanocores=round(used / elapsed * 1e9), memory_bytes=later.usage.memory_bytes,
                   timestamp=later.time, window_seconds=elapsed)

    def usage_quantities(self) -> dict[str, str]:
        return {"cpu": f"{self.nanocores}n", "memory": f"{self.memory_bytes // 1024}Ki"}


class UsageHistory(Generic[Key]):
    """Recent samples per key (a container, a node): enough to span one window."""

    def __init__(self, window_seconds: float = DEFAULT_WINDOW_SECONDS) -> None:
        self.window_seconds = window_seconds
        self._samples: dict[Key, deque[Sample]] = {}

    def record(self, key: Key, sample: Sample) -> None:
        samples = self._samples.setdefault(key, deque())
        samples.append(sample)
        # Keep the newest sample at least a window old: the next rate starts there.
        while len(samples) > 2 and samples[1].time <= sample.time - self.window_seconds:
            samples.popleft()

    def forget(self, key: Key) -> None:
        self._samples.pop(key, None)

    def rate(self, key: Key) -> Optional[Rate]:
        """Over the last window (or what there is of it); None before two samples exist."""
        samples = self._samples.get(key)
        if not samples or len(samples) < 2 or samples[-1].time <= samples[0].time:
            return None
        return Rate.between(samples[0], samples[-1])


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_duration(seconds: float) -> str:
    """A window as Go's time.Duration prints it ("15s", "10.25s", "1m0.5s")."""
    milliseconds = round(seconds * 1000)
    minutes, rest = divmod(milliseconds, 60_000)
    text = f"{rest / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{minutes}m{text}" if minutes else text


def pod_metrics(*, name: str, namespace: str, labels: Optional[Mapping[str, str]],
                containers: Mapping[str, Rate]) -> Optional[dict[str, Any]]:
    """A PodMetrics object; None when no container has a rate yet (metrics-server omits such pods)."""
    if not containers:
        return None
    latest = max(containers.values(), key=lambda rate: rate.timestamp)
    return {"kind": "PodMetrics", "apiVersion": API_VERSION,
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "timestamp": rfc3339(latest.timestamp), "window": go_duration(latest.window_seconds),
            "containers": [{"name": container, "usage": rate.usage_quantities()}
                           for container, rate in containers.items()]}


def node_metrics(*, name: str, labels: Optional[Mapping[str, str]], rate: Rate) -> dict[str, Any]:
    return {"kind": "NodeMetrics", "apiVersion": API_VERSION,
            "metadata": {"name": name, "labels": dict(labels or {})},
            "timestamp": rfc3339(rate.timestamp), "window": go_duration(rate.window_seconds),
            "usage": rate.usage_quantities()}


def metrics_list(kind: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """``PodMetricsList`` / ``NodeMetricsList`` for a list request."""
    return {"kind": f"{kind}List", "apiVersion": API_VERSION, "metadata": {}, "items": items}
