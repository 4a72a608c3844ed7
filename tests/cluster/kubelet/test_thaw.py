"""A frozen node thaws: which pod processes may run again, and who resumes them.

The whole story (a kubelet that kills a deleted pod's processes before they run again) is in
tests/local/cluster/test_nodes.py; here the parts that need no cluster.
"""

import signal
import subprocess
import sys
import threading

import pytest

from trainctl.cluster import machines as nodes
from trainctl.cluster.faults.freeze import thaw_node
from trainctl.cluster.kubelet import thaw
from trainctl.cluster.kubelet.kubelet import processes_dir
from trainctl.cluster.kubelet.runtime import ProcessRecord, ProcessRegistry, process_start_time, process_stopped
from trainctl.cluster.pidfiles import write_pid_file

from tests.support.waiting import wait_on


def record(uid, pid=1, start="1"):
    return ProcessRecord(pid, start, uid, "main")


def test_only_the_pods_still_in_the_api_resume():
    records = [record("kept"), record("gone"), record("kept-too")]
    assert thaw.to_resume(records, {"kept", "kept-too", "elsewhere"}) == [records[0], records[2]]
    assert thaw.to_resume(records, set()) == []


def test_all_resume_when_the_api_server_did_not_answer():
    records = [record("a"), record("b")]
    assert thaw.to_resume(records, None) == records


@pytest.fixture
def stopped_sleeper():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    process.send_signal(signal.SIGSTOP)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def settles(check, timeout=5.0):
    """Whether ``check()`` comes true within ``timeout`` (process states are polled)."""
    return wait_on(threading.Condition(), check, timeout, recheck=0.02)


def test_a_stopped_process_is_seen_stopped(stopped_sleeper):
    assert settles(lambda: process_stopped(stopped_sleeper.pid))
    stopped_sleeper.send_signal(signal.SIGCONT)
    assert settles(lambda: not process_stopped(stopped_sleeper.pid))


def frozen_node(tmp_path, process):
    """A one-node cluster directory whose node is frozen with ``process`` as its one pod."""
    assert settles(lambda: process_stopped(process.pid))
    spec = nodes.node_specs(1)[0]
    nodes.write_nodes(tmp_path, [spec])
    ProcessRegistry(processes_dir(tmp_path, spec.name)).add(
        ProcessRecord(process.pid, process_start_time(process.pid) or "", "uid-1", "main"))
    nodes.set_state(tmp_path, spec.name, nodes.FROZEN)
    return spec


def test_thaw_resumes_the_pods_itself_when_the_node_has_no_kubelet(tmp_path, stopped_sleeper):
    spec = frozen_node(tmp_path, stopped_sleeper)
    assert thaw_node(tmp_path, spec.name) == 1
    assert settles(lambda: not process_stopped(stopped_sleeper.pid))
    assert nodes.node_state(tmp_path, spec.name) == ""


def test_thaw_resumes_what_a_silent_kubelet_left_stopped_after_the_timeout(tmp_path, stopped_sleeper):
    spec = frozen_node(tmp_path, stopped_sleeper)
    kubelet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # ignores SIGCONT
    try:
        write_pid_file(tmp_path / "run" / f"{spec.component}.pid", kubelet.pid)  # with its start time, as the supervisor writes it
        assert thaw_node(tmp_path, spec.name, timeout=0.3) == 2
    finally:
        kubelet.kill()
        kubelet.wait()
    assert settles(lambda: not process_stopped(stopped_sleeper.pid))
