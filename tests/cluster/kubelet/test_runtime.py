"""Containers as process groups: CRI logs, exit codes, graceful stop, leftovers after a crash."""

import os
import re
import signal
import sys
import textwrap
import threading

import pytest

from trainctl.cluster.compute import container_limits as limits
from trainctl.cluster.compute import polling
from trainctl.cluster.kubelet import paths
from trainctl.cluster.kubelet.runtime import ContainerProcess, ProcessRegistry, Stdio, process_start_time

CRI_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (stdout|stderr) [FP] (.*)$")


def start(tmp_path, code, name="c", stdio=None):
    registry = ProcessRegistry(tmp_path / "processes")
    process = ContainerProcess([sys.executable, "-c", textwrap.dedent(code)], dict(os.environ), str(tmp_path),
                               tmp_path / "logs" / "0.log", registry, "uid-1", name,
                               polling.PolledGroup(limits.ContainerLimits(), on_close=lambda _group: None), stdio or Stdio())
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

    log = tmp_path / "logs" / "0.log"
    first_run = log.stat().st_size  # the second process appends to the same log
    stubborn, _ = start(tmp_path, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """, name="d")
    while "ready" not in log.read_bytes()[first_run:].decode():
        assert stubborn.wait(0.05) is None, "the stubborn process ended before it was ready"
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


class Heard:
    """What an attached client hears, by stream."""

    def __init__(self):
        self.chunks = {"stdout": b"", "stderr": b""}
        self.ended = set()
        self.changed = threading.Condition()

    def __call__(self, stream, chunk):
        with self.changed:
            if chunk is None:
                self.ended.add(stream)
            else:
                self.chunks[stream] += chunk
            self.changed.notify_all()

    def wait(self, predicate, timeout=30):
        with self.changed:
            assert self.changed.wait_for(predicate, timeout), self.chunks


def test_a_stdin_once_container_reads_what_the_attached_client_writes_until_it_closes(tmp_path):
    process, _ = start(tmp_path, """
        import sys
        print("ready", flush=True)
        print(sys.stdin.read().upper(), end="", flush=True)
    """, stdio=Stdio(stdin=True, stdin_once=True))
    heard = Heard()
    attachment = process.attach(heard)
    heard.wait(lambda: b"ready" in heard.chunks["stdout"])
    attachment.write(b"one\n")
    attachment.write(b"two\n")
    attachment.close_stdin()
    assert process.wait(30) == 0
    heard.wait(lambda: heard.ended == {"stdout", "stderr"})
    assert heard.chunks["stdout"] == b"ready\nONE\nTWO\n"
    records = [line.split(" ", 3)[1:] for line in (tmp_path / "logs" / "0.log").read_text().splitlines()]
    assert {stream for stream, _, _ in records} == {"stdout"}
    # what `kubectl logs` shows: a partial record (P) continues in the next
    assert "".join(text + ("\n" if tag == "F" else "") for _, tag, text in records) == "ready\nONE\nTWO\n"
    late = Heard()
    process.attach(late)  # after the end: told at once
    assert late.ended == {"stdout", "stderr"}


def test_a_tty_container_runs_on_a_terminal_that_attach_resizes(tmp_path):
    process, _ = start(tmp_path, """
        import os, shutil, sys
        print("tty" if os.isatty(0) and os.isatty(1) else "no tty", flush=True)
        sys.stdin.readline()
        print(os.get_terminal_size(1), flush=True)
    """, stdio=Stdio(stdin=True, tty=True))
    assert process.outputs == ["stdout"]
    heard = Heard()
    attachment = process.attach(heard)
    heard.wait(lambda: b"tty" in heard.chunks["stdout"])
    attachment.resize(120, 40)
    attachment.write(b"\n")
    assert process.wait(30) == 0
    heard.wait(lambda: heard.ended == {"stdout"})
    assert heard.chunks["stdout"].startswith(b"tty\r\n")
    assert b"columns=120, lines=40" in heard.chunks["stdout"]
