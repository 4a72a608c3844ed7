"""Memory limits, OOM verdicts and usage, on every back end this machine has."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from trainctl.cluster.compute.container_limits import ContainerLimits, terminated_fields

from .conftest import ALLOCATOR, BUSY_LOOP

BACKENDS = ["cgroup-v1", "polling"]
LIMIT_64MI = ContainerLimits(memory_bytes=64 * 2**20)


@pytest.mark.parametrize("node_enforcer", BACKENDS, indirect=True)
def test_a_container_allocating_past_its_memory_limit_is_oom_killed(node_enforcer, start) -> None:
    group = node_enforcer.container("pod-1", "main", LIMIT_64MI)
    process = start(group, ALLOCATOR, 8, 0.02, 1536)  # 8 MiB every 20 ms, up to 1.5 GiB
    returncode = process.wait(timeout=60)
    allocated = [float(line) for line in process.stdout.read().split()]

    assert returncode == -9, f"not killed; allocated up to {allocated[-1:]} MiB"
    assert group.oom_killed()
    assert max(allocated, default=0) < 512  # stopped long before it could hurt the machine
    group.close()
    assert terminated_fields(137, oom_killed=group.oom_killed()) == {"exitCode": 137, "reason": "OOMKilled"}


@pytest.mark.parametrize("node_enforcer", BACKENDS, indirect=True)
def test_a_process_that_leaves_the_session_still_counts_against_the_limit(node_enforcer, start) -> None:
    """As torchrun's workers do (``start_new_session``)."""
    group = node_enforcer.container("pod-1", "main", LIMIT_64MI)
    spawner = ("import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', sys.argv[1], '8', '0.02', '1536'],"
               " start_new_session=True); sys.exit(128 - child.wait())")
    process = start(group, spawner, ALLOCATOR)

    # cgroups kill the biggest process, the spawner then reports it; polling kills them all.
    assert process.wait(timeout=60) in (128 + signal.SIGKILL, -signal.SIGKILL)
    assert group.oom_killed()
    group.close()


@pytest.mark.parametrize("node_enforcer", BACKENDS, indirect=True)
def test_an_oom_kill_of_one_process_ends_the_whole_container(node_enforcer, start) -> None:
    """A launcher (torchrun) whose child ran out of memory would restart it with the same
    limit: as with v2's memory.oom.group, the container dies as a whole and is OOMKilled."""
    group = node_enforcer.container("pod-1", "main", LIMIT_64MI)
    launcher = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1], '8', '0.02', '1536'],"
                " start_new_session=True).wait(); time.sleep(60)")
    process = start(group, launcher, ALLOCATOR)
    began = time.monotonic()

    assert process.wait(timeout=60) == -signal.SIGKILL
    assert time.monotonic() - began < 30
    assert group.oom_killed()
    group.close()


@pytest.mark.parametrize("node_enforcer", BACKENDS, indirect=True)
def test_a_container_under_its_limit_runs_to_completion(node_enforcer, start) -> None:
    group = node_enforcer.container("pod-1", "main", LIMIT_64MI)
    process = start(group, ALLOCATOR, 8, 0.1, 16)

    assert process.wait(timeout=60) == 0
    assert not group.oom_killed()
    group.close()


@pytest.mark.parametrize("node_enforcer", BACKENDS, indirect=True)
def test_usage_grows_while_a_container_works(node_enforcer, start) -> None:
    group = node_enforcer.container("pod-1", "main", ContainerLimits())
    process = start(group, ALLOCATOR + BUSY_LOOP.replace("sys.argv[1]", "3"), 32, 0, 32)
    deadline = time.monotonic() + 30
    first = group.usage()
    while (usage := group.usage()).cpu_seconds < first.cpu_seconds + 0.3 and time.monotonic() < deadline:
        time.sleep(0.1)

    assert usage.cpu_seconds >= first.cpu_seconds + 0.3
    assert usage.memory_bytes > 32 * 2**20
    assert node_enforcer.node_usage().cpu_seconds >= usage.cpu_seconds
    process.wait(timeout=60)
    group.close()


@pytest.mark.parametrize("node_enforcer", ["polling"], indirect=True)
def test_polling_stops_a_runaway_process_long_before_it_hurts_the_machine(node_enforcer, start) -> None:
    """Measured in what the process got, not in seconds: on a loaded machine both the
    poller and the allocator run late."""
    group = node_enforcer.container("pod-1", "main", LIMIT_64MI)
    process = start(group, ALLOCATOR, 8, 0.02, 4096)  # 8 MiB every 20 ms, up to 4 GiB
    returncode = process.wait(timeout=60)
    allocated = [float(line) for line in process.stdout.read().split()]

    assert returncode == -9 and group.oom_killed()
    assert max(allocated, default=0) < 1024, f"allocated up to {allocated[-1:]} MiB before the poller stopped it"
    assert "CPU limits not enforced" in node_enforcer.describe()
    group.close()


@pytest.mark.parametrize("node_enforcer", BACKENDS, indirect=True)
def test_a_process_joining_a_running_container_counts_against_its_limit(node_enforcer, start) -> None:
    """``kubectl exec``: another session, not a descendant of the container's process."""
    group = node_enforcer.container("pod-1", "main", LIMIT_64MI)
    main = start(group, "import time; time.sleep(60)")
    joined = subprocess.Popen([sys.executable, "-c", ALLOCATOR, "8", "0.02", "1536"], stdout=subprocess.PIPE,
                              text=True, start_new_session=True, preexec_fn=group.preexec())
    group.join(joined.pid)
    try:
        assert joined.wait(timeout=60) == -9
        assert group.oom_killed()
    finally:
        for process in (main, joined):
            if process.poll() is None:
                process.kill()
            process.wait()
        assert joined.stdout is not None
        joined.stdout.close()
