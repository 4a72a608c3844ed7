"""The kubelet's usage publisher: rates per container, PodMetrics per pod, the node as their
sum plus the kubelet's own process."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainctl.cluster.compute.accounting import Usage
from trainctl.cluster.kubelet import usage


@dataclass
class FakeGroup:
    cpu_seconds: float = 0.0
    memory_bytes: int = 0

    def usage(self) -> Usage:
        return Usage(cpu_seconds=self.cpu_seconds, memory_bytes=self.memory_bytes)


@dataclass
class FakeWorker:
    name: str
    groups: dict[str, FakeGroup]
    namespace: str = "default"
    pod: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pod = {"metadata": {"name": self.name, "labels": {"app": self.name}}}

    def container_groups(self) -> dict[str, FakeGroup]:
        return dict(self.groups)


def test_pods_get_rates_over_their_samples_and_the_node_is_their_sum(monkeypatch) -> None:
    kubelet = FakeGroup()
    a, b = FakeGroup(memory_bytes=4 << 20), FakeGroup(memory_bytes=8 << 20)
    workers = {"uid-a": FakeWorker("a", {"main": a}), "uid-b": FakeWorker("b", {"main": b})}
    publisher = usage.UsagePublisher(client=None, node="n1", workers=lambda: workers, interval=2.0,  # type: ignore[arg-type]
                                     own_usage=kubelet.usage)
    clock = iter([100.0, 102.0])
    monkeypatch.setattr(usage.time, "time", lambda: next(clock, 102.0))
    publisher.sample()
    a.cpu_seconds, b.cpu_seconds = 1.0, 0.5  # one core and half a core over 2 s
    publisher.sample()
    node, pods = publisher.report()
    by_name = {pod["metadata"]["name"]: pod for pod in pods}
    assert by_name["a"]["containers"] == [{"name": "main", "usage": {"cpu": "500000000n", "memory": "4096Ki"}}]
    assert by_name["b"]["containers"][0]["usage"]["cpu"] == "250000000n"
    assert by_name["a"]["metadata"]["labels"] == {"app": "a"}
    assert node["usage"] == {"cpu": "750000000n", "memory": f"{12 << 10}Ki"}
    assert node["window"] == "2s"


def test_a_container_that_ended_is_forgotten_and_an_idle_node_reports_zero(monkeypatch) -> None:
    kubelet = group = FakeGroup()
    workers = {"uid-a": FakeWorker("a", {"main": group})}
    publisher = usage.UsagePublisher(client=None, node="n1", workers=lambda: workers, interval=2.0,  # type: ignore[arg-type]
                                     own_usage=kubelet.usage)
    publisher.sample()
    publisher.sample()
    workers.clear()
    publisher.sample()
    node, pods = publisher.report()
    assert pods == []
    assert publisher.history.rate(("uid-a", "main")) is None
    assert node["usage"] == {"cpu": "0n", "memory": "0Ki"}


def test_the_node_counts_the_kubelets_own_process_beside_its_pods(monkeypatch) -> None:
    kubelet, pod = FakeGroup(memory_bytes=64 << 20), FakeGroup(memory_bytes=8 << 20)
    workers = {"uid-a": FakeWorker("a", {"main": pod})}
    publisher = usage.UsagePublisher(client=None, node="n1", workers=lambda: workers, interval=2.0,  # type: ignore[arg-type]
                                     own_usage=kubelet.usage)
    clock = iter([100.0, 102.0])
    monkeypatch.setattr(usage.time, "time", lambda: next(clock, 102.0))
    publisher.sample()
    kubelet.cpu_seconds, pod.cpu_seconds = 0.2, 1.0  # a tenth of a core and half a core over 2 s
    publisher.sample()
    node, pods = publisher.report()
    assert [p["metadata"]["name"] for p in pods] == ["a"]  # the kubelet is no pod
    assert node["usage"] == {"cpu": "600000000n", "memory": f"{72 << 10}Ki"}


def test_the_kubelets_own_usage_is_read_from_this_process() -> None:
    first = usage.process_usage()
    sum(i * i for i in range(200_000))  # some CPU time
    second = usage.process_usage()
    assert second.cpu_seconds >= first.cpu_seconds > 0
    assert second.memory_bytes > 1 << 20  # a Python process holds more than a MiB
