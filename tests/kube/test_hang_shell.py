"""The shell of hang detection: what a usage reading makes of a pod's progress, and the in-pod
program that reports, freezes and dumps a container's Python processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

import pytest

from trainctl.controller import in_pod_processes
from trainctl.controller.hang_observer import STOPPED, WAITING, WORKING, cpu_cores, observe, process_look
from trainctl.controller.reconcile.plan import PodProgress
from trainctl.controller.stack_capture import stacks_of

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
IDLE = 0.05


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Looks:
    """A look at the pod's processes that answers ``answer`` and counts how often it was asked."""

    def __init__(self, answer: Optional[str]) -> None:
        self.answer, self.asked = answer, 0

    def __call__(self) -> Optional[str]:
        self.asked += 1
        return self.answer


def test_a_busy_window_is_progress_and_an_idle_one_is_looked_into() -> None:
    assert observe(None, 0.0, at(0), IDLE, Looks(WAITING)) is None, "a pod that never worked is not judged"
    first = observe(None, 0.9, at(0), IDLE, Looks(STOPPED))
    assert first == PodProgress(at(0), at(0))
    busy = observe(first, 0.9, at(15), IDLE, Looks(STOPPED))
    assert busy == PodProgress(at(15), at(15))
    stopped = Looks(STOPPED)
    idle = observe(busy, 0.0, at(30), IDLE, stopped)
    assert idle == PodProgress(at(15), at(30), stopped=True) and stopped.asked == 1
    assert observe(idle, 0.0, at(30), IDLE, stopped) is idle, "the same reading again changes nothing"


def test_a_failed_look_keeps_what_an_earlier_look_saw_and_says_so_when_there_was_none() -> None:
    busy = PodProgress(at(15), at(15))
    unseen = observe(busy, 0.0, at(30), IDLE, Looks(None))
    assert unseen.stopped is None
    seen = observe(unseen, 0.0, at(45), IDLE, Looks(STOPPED))
    assert observe(seen, 0.0, at(60), IDLE, Looks(None)).stopped is True


def test_an_idle_pod_whose_processes_are_runnable_is_starved_not_hung() -> None:
    busy = PodProgress(at(15), at(15))
    assert observe(busy, 0.01, at(30), IDLE, Looks(WORKING)) == PodProgress(at(30), at(30))
    assert observe(busy, 0.01, at(30), IDLE, Looks(WAITING)) == PodProgress(at(15), at(30), stopped=False)


def test_what_the_processes_say() -> None:
    def procs(*states: str) -> list[dict[str, object]]:
        return [{"pid": i, "state": s, "python": True} for i, s in enumerate(states)] + [
            {"pid": 99, "state": "R", "python": False}]  # a shell's state says nothing

    assert process_look(procs("S", "T")) == STOPPED
    assert process_look(procs("S", "R")) == WORKING and process_look(procs("D")) == WORKING
    assert process_look(procs("S", "S")) == WAITING
    assert process_look(None) is None


def test_cpu_is_summed_over_containers() -> None:
    metrics = {"containers": [{"usage": {"cpu": "250m"}}, {"usage": {"cpu": "1500000n"}}]}
    assert cpu_cores(metrics) == pytest.approx(0.2515)
    assert cpu_cores({"containers": [{"usage": {"cpu": "lots"}}]}) is None


def test_the_stacks_are_cut_from_the_first_dump_on() -> None:
    log = "[step] step=1\n[step] step=2\nFatal Python error: Aborted\n\nThread 0x1 (most recent call first):\n  File \"x.py\""
    assert stacks_of(log).startswith("Fatal Python error: Aborted")
    assert stacks_of("just a log\n") == "just a log"


@pytest.fixture
def marked_sleeper(tmp_path: Path):
    """A Python process marked as a container's, with faulthandler on, its stderr in a file."""
    marker = f"hang-test-{os.getpid()}-{time.monotonic_ns()}"
    stderr = tmp_path / "stderr"
    env = {**os.environ, "TRAINCTL_CONTAINER_ID": marker, "PYTHONFAULTHANDLER": "1"}
    script = "import sys, time\nsys.stdout.write('ready\\n'); sys.stdout.flush()\ndef waiting_in_a_collective():\n" \
             "    time.sleep(600)\nwaiting_in_a_collective()\n"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    yield marker, proc, stderr
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
    proc.wait()


def in_container(marker: str, mode: str) -> str:
    """The in-pod program run as the controller runs it, in the marked container's environment."""
    source = Path(in_pod_processes.__file__).read_text()
    env = {**os.environ, "TRAINCTL_CONTAINER_ID": marker}
    return subprocess.run([sys.executable, "-c", source, mode], env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout


def test_the_program_sees_only_its_containers_processes_freezes_and_dumps_them(marked_sleeper) -> None:
    marker, proc, stderr = marked_sleeper
    (found,) = json.loads(in_container(marker, "states"))["processes"]
    assert found["pid"] == proc.pid and found["python"] and found["state"] == "S"

    json.loads(in_container(marker, "freeze").splitlines()[0])
    (frozen,) = json.loads(in_container(marker, "states"))["processes"]
    assert frozen["state"] == "T"

    json.loads(in_container(marker, "dump").splitlines()[0])
    assert proc.wait(timeout=30) == -signal.SIGABRT
    dumped = stderr.read_text()
    assert "Fatal Python error: Aborted" in dumped and "waiting_in_a_collective" in dumped, dumped
