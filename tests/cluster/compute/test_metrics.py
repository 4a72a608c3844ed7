"""Usage samples to metrics.k8s.io PodMetrics and NodeMetrics."""

from __future__ import annotations

import pytest

from trainctl.cluster.compute.accounting import Usage
from trainctl.cluster.compute.pod_metrics import (
    Rate,
    Sample,
    UsageHistory,
    go_duration,
    metrics_list,
    node_metrics,
    pod_metrics,
)

T0 = 1_790_000_000.0  # 2026-09-21T14:13:20Z


def sample(at: float, cpu: float, memory: int = 0) -> Sample:
    return Sample(time=T0 + at, usage=Usage(cpu_seconds=cpu, memory_bytes=memory))


def test_cpu_rate_is_in_nanocores_and_memory_in_kibibytes() -> None:
    rate = Rate.between(sample(0, 10.0), sample(10, 12.5, memory=300 * 2**20 + 1000))

    assert rate.nanocores == 250_000_000
    assert rate.usage_quantities() == {"cpu": "250000000n", "memory": "307200Ki"}
    assert rate.window_seconds == 10


def test_a_counter_going_back_counts_as_idle_and_equal_times_are_an_error() -> None:
    assert Rate.between(sample(0, 5.0), sample(1, 1.0)).nanocores == 0
    with pytest.raises(ValueError):
        Rate.between(sample(1, 0), sample(1, 1))


def test_history_spans_at_least_one_window_and_forgets_older_samples() -> None:
    history: UsageHistory[str] = UsageHistory(window_seconds=15)
    assert history.rate("c") is None
    history.record("c", sample(0, 0))
    assert history.rate("c") is None  # metrics-server also needs two scrapes

    for second in range(5, 41, 5):  # one CPU busy throughout
        history.record("c", sample(second, float(second)))
    rate = history.rate("c")

    assert rate is not None and rate.window_seconds == 15 and rate.nanocores == 10**9
    history.forget("c")
    assert history.rate("c") is None


def test_go_duration() -> None:
    assert [go_duration(s) for s in (15, 10.25, 0.5, 60.5, 125)] == ["15s", "10.25s", "0.5s", "1m0.5s", "2m5s"]


def test_pod_and_node_metrics_have_metrics_server_shape() -> None:
    rate = Rate.between(sample(0, 1.0), sample(15, 1.5, memory=2**20))
    pod = pod_metrics(name="job-worker-0", namespace="default", labels={"app": "x"},
                      containers={"pytorch": rate})
    node = node_metrics(name="trainctl-local", labels=None, rate=rate)

    assert pod == {"kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                   "metadata": {"name": "job-worker-0", "namespace": "default", "labels": {"app": "x"}},
                   "timestamp": "2026-09-21T14:13:35Z", "window": "15s",
                   "containers": [{"name": "pytorch", "usage": {"cpu": "33333333n", "memory": "1024Ki"}}]}
    assert node["kind"] == "NodeMetrics" and node["usage"] == {"cpu": "33333333n", "memory": "1024Ki"}
    assert node["metadata"] == {"name": "trainctl-local", "labels": {}}
    assert pod_metrics(name="p", namespace="n", labels=None, containers={}) is None
    assert metrics_list("NodeMetrics", [node])["kind"] == "NodeMetricsList"
