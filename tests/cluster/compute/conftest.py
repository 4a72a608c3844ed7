"""Containers as the kubelet runs them (a child process in its own session) inside a
resource group, and programs that allocate memory or burn CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any, Callable, Iterator

import pytest

from trainctl.cluster.compute import cgroups, enforcer
from trainctl.cluster.compute.accounting import ContainerGroup

# Allocates (and touches) CHUNK MiB every PAUSE seconds up to CAP MiB, printing the total;
# exits 0 at the cap, so an enforcer that does not act lets it finish.
ALLOCATOR = """
import sys, time
chunk, pause, cap = (float(a) for a in sys.argv[1:4])
held = []
while len(held) * chunk < cap:
    held.append(bytearray(int(chunk * 2**20)))
    print(len(held) * chunk, flush=True)
    time.sleep(pause)
"""

BUSY_LOOP = """
import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
"""


@pytest.fixture
def cluster_name() -> str:
    """Unique per test: parallel runs on one machine must not clean up each other's groups."""
    return f"test-{uuid.uuid4().hex[:10]}"


def has_cgroup_v1() -> bool:
    hierarchies = cgroups.system_hierarchies()
    controllers = {c for h in hierarchies if h.version == 1 for c in h.controllers}
    mounts = [h.mount for h in hierarchies if h.version == 1 and h.controllers]
    return set(cgroups.V1_CONTROLLERS) <= controllers and all(os.access(m, os.W_OK) for m in mounts)


@pytest.fixture
def start() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``start(group, program, *args)``: run a Python program as the kubelet runs a container."""
    started: list[subprocess.Popen[str]] = []

    def run(group: ContainerGroup, program: str, *args: Any) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, "-c", program, *map(str, args)], stdout=subprocess.PIPE,
                                   text=True, start_new_session=True, preexec_fn=group.preexec())
        group.add(process.pid)
        started.append(process)
        return process
    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout:
            process.stdout.close()


@pytest.fixture
def node_enforcer(cluster_name: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The back end named by the test's ``backend`` parameter, for node ``node-a``."""
    kind = request.param
    if kind == "cgroup-v1" and not has_cgroup_v1():
        pytest.skip("this machine has no writable cgroup v1 memory, cpu and cpuacct hierarchies")
    chosen = enforcer.detect(cluster=cluster_name, node="node-a", force=kind)
    try:
        yield chosen
    finally:
        chosen.close()
