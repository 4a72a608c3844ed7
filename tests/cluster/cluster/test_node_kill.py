"""``trainctl local node kill`` returns only when the node's processes are dead.

A SIGKILL is not a death: under load the kernel may end a killed process a while after the
signal was sent. Here the signals reach the processes half a second late, as on a busy
machine; the command must not return before they are gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest

from trainctl.cluster import machines
from trainctl.cluster.faults import kill, processes
from trainctl.cluster.kubelet.kubelet import processes_dir
from trainctl.cluster.kubelet.runtime import ProcessRecord, ProcessRegistry, process_start_time
from trainctl.cluster.pidfiles import read_pid_file, write_pid_file

SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]
LATE = 0.5  # seconds between a SIGKILL sent and the process ending


@pytest.fixture
def node(tmp_path):
    """A node ``n1`` of a cluster in ``tmp_path``: a kubelet and one pod process group."""
    spec = machines.NodeSpec("n1", "kubelet-n1", "1", "1Gi")
    machines.write_nodes(tmp_path, [spec])
    kubelet = subprocess.Popen(SLEEP)
    pod = subprocess.Popen(SLEEP, start_new_session=True)
    try:
        write_pid_file(tmp_path / "run" / "kubelet-n1.pid", kubelet.pid)
        start = process_start_time(pod.pid)
        assert start is not None
        ProcessRegistry(processes_dir(tmp_path, "n1")).add(ProcessRecord(pod.pid, start, "uid-1", "main"))
        yield kubelet, pod
    finally:
        for process in (kubelet, pod):
            process.kill()
            process.wait()


def signals_late(monkeypatch, kills: bool = True) -> None:
    """SIGKILLs take effect ``LATE`` seconds after they are sent (never, unless ``kills``)."""
    def late(original, reports):
        def send(target, signum):
            answer = reports(target)
            if signum != signal.SIGKILL:
                original(target, signum)
            elif kills:
                threading.Timer(LATE, original, (target, signum)).start()
            return answer
        return send
    monkeypatch.setattr(processes, "signal_pid_file", late(processes.signal_pid_file, read_pid_file))
    monkeypatch.setattr(processes, "signal_live", late(processes.signal_live, lambda records: sum(r.alive() for r in records)))


def test_kill_returns_when_the_processes_are_dead(node, tmp_path, monkeypatch):
    kubelet, pod = node
    signals_late(monkeypatch)
    assert kill.kill_node(tmp_path, "n1") == 2
    assert process_start_time(kubelet.pid) is None and process_start_time(pod.pid) is None
    assert machines.node_state(tmp_path, "n1") == machines.KILLED


def test_a_process_that_will_not_die_is_reported(node, tmp_path, monkeypatch):
    kubelet, pod = node
    signals_late(monkeypatch, kills=False)
    with pytest.raises(machines.NodeError, match="still alive") as raised:
        kill.kill_node(tmp_path, "n1", timeout=1.0)
    assert str(kubelet.pid) in str(raised.value) and str(pod.pid) in str(raised.value)
