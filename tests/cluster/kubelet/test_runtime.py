"""Containers as process groups: CRI logs, exit codes, graceful stop, leftovers after a crash."""

import os
import re
import signal
import sys
import textwrap

import pytest

from trainctl.cluster.kubelet import paths
from trainctl.cluster.kubelet.runtime import ContainerProcess, ProcessRegistry, process_start_time
from trainctl.cluster.resources import limits, polling

CRI_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (stdout|stderr) [FP] (.*)$")


def start(tmp_path, code, name="c"):
    registry = ProcessRegistry(tmp_path / "processes")
    process = ContainerProcess([sys.executable, "-c", textwrap.dedent(code)], dict(os.environ), str(tmp_path),
                               tmp_path / "logs" / "0.log", registry, "uid-1", name,
                               polling.PolledGroup(limits.ContainerLimits(), on_close=lambda _group: None))
    return process, registry


def test_output_goes_to_a_cri_log_and_the_exit_code_is_reported(tmp_path):
    process, registry = start(tmp_path, """
        import sys
        print("hello")
        print("oops", file=sys.stderr)
        sys.stdout.write("no newline")
        sys.exit(3)
    """)
    assert registry.records()[0].pid == process.pid
    assert process.wait() == 3
    lines = [CRI_LINE.match(line).groups() for line in (tmp_path / "logs" / "0.log").read_text().splitlines()]
    assert sorted(lines) == [("stderr", "oops"), ("stdout", "hello"), ("stdout", "no newline")]
    assert registry.records() == []


def test_stop_sends_sigterm_to_the_group_then_sigkill(tmp_path):
    process, _ = start(tmp_path, """
        import signal, sys, time
        def bye(*_):
            print("got SIGTERM", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, bye)
        print("ready", flush=True)
        time.sleep(60)
    """)
    with open(tmp_path / "logs" / "0.log") as log:  # wait for the handler to be installed
        while "ready" not in log.read():
            process.wait(0.05)
    assert process.stop(5) == 0
    assert "got SIGTERM" in (tmp_path / "logs" / "0.log").read_text()

    stubborn, _ = start(tmp_path, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """, name="d")
    with open(tmp_path / "logs" / "0.log") as log:
        log.read()
        while "ready" not in log.read():
            stubborn.wait(0.05)
    assert stubborn.stop(0.2) == 128 + signal.SIGKILL


def test_leftover_process_groups_are_killed(tmp_path):
    process, registry = start(tmp_path, "import time; time.sleep(60)")
    killed = ProcessRegistry(tmp_path / "processes").kill_leftovers()
    assert [r.pid for r in killed] == [process.pid]
    assert process.wait(10) == 128 + signal.SIGKILL
    assert registry.records() == []


def test_a_process_that_cannot_be_recorded_is_not_left_running(tmp_path):
    marker = tmp_path / "pid"
    code = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    with pytest.raises(paths.OutsideDirectory):
        start(tmp_path, code, name="../escape")
    assert not (tmp_path / "escape.json").exists() and not list((tmp_path / "processes").iterdir())
    if marker.exists():  # it may have started before it was killed: it must be gone now
        pid = int(marker.read_text() or 0)
        assert pid == 0 or process_start_time(pid) is None
