"""The prober's decisions (pure) and its checks against real sockets and processes."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainctl.cluster.kubelet.prober import (
    LIVENESS,
    READINESS,
    STARTUP,
    ContainerProber,
    ContainerProbes,
    Outcome,
    ProbeSpec,
    ProbeState,
    container_port,
    exec_check,
    http_check,
    tcp_check,
)

EXEC = {"exec": {"command": ["true"]}}


def dial(host: str, port: int, timeout: float) -> socket.socket:
    return socket.create_connection((host, port), timeout=timeout)


def test_probe_fields_default_as_kube_and_liveness_counts_one_success():
    spec = ProbeSpec.parse(LIVENESS, {**EXEC, "successThreshold": 5, "initialDelaySeconds": 0})
    assert spec == ProbeSpec(LIVENESS, "exec", EXEC["exec"], initial_delay=0.0, period=10.0, timeout=1.0,
                             success_threshold=1, failure_threshold=3, termination_grace=None)
    readiness = ProbeSpec.parse(READINESS, {**EXEC, "periodSeconds": 2, "timeoutSeconds": 3, "successThreshold": 2,
                                            "failureThreshold": 1, "initialDelaySeconds": 4})
    assert readiness is not None
    assert (readiness.period, readiness.timeout, readiness.success_threshold, readiness.failure_threshold,
            readiness.initial_delay) == (2.0, 3.0, 2, 1, 4.0)
    assert ProbeSpec.parse(LIVENESS, {"periodSeconds": 1}) is None  # no handler: nothing to run
    assert ProbeSpec.parse(STARTUP, {"tcpSocket": {"port": 80}, "terminationGracePeriodSeconds": 5}).termination_grace == 5


def test_a_result_counts_after_its_threshold_in_a_row():
    state = ProbeState(ProbeSpec(READINESS, "exec", {}, success_threshold=2, failure_threshold=3))
    assert state.result is False  # not ready before any success counts
    assert not state.record(True)
    assert state.result is False
    assert state.record(True) and state.result is True
    assert not state.record(False) and not state.record(False)
    assert not state.record(True)  # the run of failures is broken: start counting again
    assert not state.record(False) and not state.record(False)
    assert state.record(False) and state.result is False
    assert state.due(0.0, started=True)  # readiness goes on probing after a failure


def test_a_failed_liveness_probe_holds_until_the_next_run():
    state = ProbeState(ProbeSpec(LIVENESS, "exec", {}, failure_threshold=2))
    assert state.result is True
    assert not state.record(False)
    assert state.record(False) and state.result is False
    assert not state.due(100.0, started=True)


def test_initial_delay_and_the_startup_gate():
    liveness = ProbeState(ProbeSpec(LIVENESS, "exec", {}, initial_delay=5))
    startup = ProbeState(ProbeSpec(STARTUP, "exec", {}))
    assert not liveness.due(4.9, started=True)
    assert liveness.due(5.0, started=True)
    assert not liveness.due(60.0, started=False)
    assert startup.due(0.0, started=False)
    assert not startup.due(0.0, started=True)


def test_container_probes_started_ready_and_failed():
    probes = ContainerProbes({"startupProbe": EXEC, "readinessProbe": EXEC, "livenessProbe": EXEC})
    assert not probes.started and not probes.ready and probes.failed() is None
    probes.states[STARTUP].record(True)
    assert probes.started and not probes.ready
    probes.states[READINESS].record(True)
    assert probes.ready
    for _ in range(3):
        probes.states[LIVENESS].record(False)
    assert probes.failed() == LIVENESS
    plain = ContainerProbes({"name": "app"})
    assert plain.started and plain.ready and not plain.states


def test_a_startup_probe_that_never_succeeds_fails_the_container():
    probes = ContainerProbes({"startupProbe": {**EXEC, "failureThreshold": 2}})
    probes.states[STARTUP].record(False)
    assert probes.failed() is None
    probes.states[STARTUP].record(False)
    assert probes.failed() == STARTUP and not probes.started


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_prober_reports_changes_each_failure_and_one_kill():
    results = iter([Outcome(True), Outcome(False, "boom"), Outcome(False, "boom again")])
    changes: list[bool] = []
    unhealthy: list[str] = []
    failed = threading.Event()
    killed: list[str] = []

    def on_failed(spec: ProbeSpec) -> None:
        killed.append(spec.kind)
        failed.set()

    container = {"livenessProbe": {**EXEC, "periodSeconds": 1, "failureThreshold": 2}}
    prober = ContainerProber(container, lambda spec: next(results), lambda: changes.append(True), unhealthy.append,
                             on_failed, clock=FakeClock())
    prober.start()
    assert failed.wait(30)
    prober.stop()
    assert killed == [LIVENESS] and prober.killed == LIVENESS
    assert unhealthy == ["Liveness probe failed: boom", "Liveness probe failed: boom again"]
    assert changes == [True]  # alive -> dead, once
    assert prober.started and prober.ready  # liveness alone says nothing of readiness


def test_a_check_that_raises_is_a_probe_error_not_a_crash():
    said: list[str] = []
    heard = threading.Event()

    def boom(spec: ProbeSpec) -> Outcome:
        raise ValueError("couldn't find port: web in container 'app'")

    def unhealthy(message: str) -> None:
        said.append(message)
        heard.set()

    prober = ContainerProber({"readinessProbe": {"tcpSocket": {"port": "web"}}}, boom, lambda: None, unhealthy,
                             lambda spec: None, clock=FakeClock())
    prober.start()
    assert heard.wait(30)
    prober.stop()
    assert said[0] == "Readiness probe errored: couldn't find port: web in container 'app'"
    assert not prober.ready


def test_named_ports_resolve_through_the_containers_ports():
    container = {"name": "app", "ports": [{"name": "web", "containerPort": 8080}]}
    assert container_port("web", container) == 8080
    assert container_port(81, container) == 81
    with pytest.raises(ValueError, match="couldn't find port: api"):
        container_port("api", container)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


def test_tcp_check_connects_or_says_why_in_kubes_words(listener: socket.socket):
    port = listener.getsockname()[1]
    assert tcp_check(dial, "127.0.0.1", port, 1.0) == Outcome(True)
    listener.close()
    refused = tcp_check(dial, "127.0.0.1", port, 1.0)
    assert refused == Outcome(False, f"dial tcp 127.0.0.1:{port}: connect: connection refused")


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, directory=str(tmp_path), **kwargs)

        def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], tmp_path
    server.shutdown()
    server.server_close()


def test_http_check_is_healthy_on_2xx_and_fails_with_the_status_code(web: tuple[int, Path]):
    port, root = web
    action = {"path": "/healthz", "port": port}
    assert http_check(dial, "127.0.0.1", port, action, 2.0) == Outcome(False, "HTTP probe failed with statuscode: 404")
    (root / "healthz").write_text("ok")
    assert http_check(dial, "127.0.0.1", port, action, 2.0) == Outcome(True)


def test_http_check_of_a_closed_port_says_get_and_dial(listener: socket.socket):
    port = listener.getsockname()[1]
    listener.close()
    outcome = http_check(dial, "127.0.0.1", port, {"path": "healthz"}, 1.0)
    assert outcome == Outcome(False, f'Get "http://127.0.0.1:{port}/healthz": dial tcp 127.0.0.1:{port}: '
                                     "connect: connection refused")


class Group:
    def __init__(self) -> None:
        self.joined: list[int] = []

    def preexec(self) -> None:
        return None

    def join(self, pid: int) -> None:
        self.joined.append(pid)


class Process:
    """What exec_check reads of a running container."""

    def __init__(self, cwd: Path) -> None:
        self.env = {"PATH": "/usr/bin:/bin", "GREETING": "hello"}
        self.cwd = str(cwd)
        self.group = Group()


def test_exec_check_runs_in_the_containers_environment_and_group(tmp_path: Path):
    process = Process(tmp_path)
    ok = exec_check(process, [], ["sh", "-c", 'echo "$GREETING from $(pwd)"'], 5.0)  # type: ignore[arg-type]
    assert ok == Outcome(True, f"hello from {tmp_path}\n")
    assert len(process.group.joined) == 1
    failed = exec_check(process, [], ["cat", "missing"], 5.0)  # type: ignore[arg-type]
    assert not failed.success and "missing: No such file or directory" in failed.message
    absent = exec_check(process, [], ["no-such-command"], 5.0)  # type: ignore[arg-type]
    assert absent == Outcome(False, 'exec: "no-such-command": executable file not found in $PATH')


def test_exec_check_kills_a_command_that_outlives_its_timeout(tmp_path: Path):
    outcome = exec_check(Process(tmp_path), [], ["sleep", "30"], 0.5)  # type: ignore[arg-type]
    assert outcome == Outcome(False, 'command "sleep 30" timed out')
