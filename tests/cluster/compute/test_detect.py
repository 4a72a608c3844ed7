"""Which back end a node gets, and the files each cgroup version is driven through."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainctl.cluster.compute import cgroups, enforcer
from trainctl.cluster.compute.cgroups import Hierarchy
from trainctl.cluster.compute.container_limits import ContainerLimits

# A cgroup v1 machine with systemd's empty unified hierarchy beside it (as this one).
MOUNTINFO = """\
25 24 0:22 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd
30 25 0:27 / /sys/fs/cgroup/memory rw,nosuid shared:14 - cgroup cgroup rw,memory
31 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:15 - cgroup cgroup rw,cpu,cpuacct
"""


def test_mountinfo_gives_each_hierarchy_and_its_controllers() -> None:
    found = cgroups.mounted_hierarchies(MOUNTINFO, read_v2_controllers=lambda mount: "")

    assert found == [Hierarchy(Path("/sys/fs/cgroup/unified"), 2, frozenset()),
                     Hierarchy(Path("/sys/fs/cgroup/systemd"), 1, frozenset()),
                     Hierarchy(Path("/sys/fs/cgroup/memory"), 1, frozenset({"memory"})),
                     Hierarchy(Path("/sys/fs/cgroup/cpu,cpuacct"), 1, frozenset({"cpu", "cpuacct"}))]


def fake_v1(root: Path) -> list[Hierarchy]:
    return [Hierarchy(root / "memory", 1, frozenset({"memory"})),
            Hierarchy(root / "cpu,cpuacct", 1, frozenset({"cpu", "cpuacct"}))]


def test_a_unified_hierarchy_without_controllers_is_passed_over_for_v1(tmp_path: Path) -> None:
    found = [Hierarchy(tmp_path / "unified", 2, frozenset()), *fake_v1(tmp_path)]

    chosen = enforcer.detect(cluster="c", node="n", hierarchies=found)

    assert chosen.kind == "cgroup-v1"
    assert chosen.describe() == (f"cgroup v1 (memory, cpu, cpuacct) under {tmp_path}/memory/trainctl/c/n, "
                                 f"{tmp_path}/cpu,cpuacct/trainctl/c/n: memory limits and CPU limits (CFS quota) "
                                 "enforced by the kernel")
    assert (tmp_path / "cpu,cpuacct" / "trainctl" / "c" / "n").is_dir()


def test_v2_with_memory_and_cpu_comes_first_and_enables_them_down_to_each_pod(tmp_path: Path) -> None:
    found = [*fake_v1(tmp_path / "v1"), Hierarchy(tmp_path, 2, frozenset({"cpu", "memory", "io"}))]

    chosen = enforcer.detect(cluster="c", node="n", hierarchies=found)
    chosen.container("pod-uid", "main", ContainerLimits(memory_bytes=2**26, cpu_millicores=250))

    assert chosen.kind == "cgroup-v2"
    node = tmp_path / "trainctl" / "c" / "n"
    for directory in (tmp_path, tmp_path / "trainctl", tmp_path / "trainctl" / "c", node, node / "pod-uid"):
        assert (directory / "cgroup.subtree_control").read_text() == "+memory +cpu"
    container = node / "pod-uid" / "main"
    assert (container / "memory.max").read_text() == str(2**26)
    assert (container / "memory.oom.group").read_text() == "1"
    assert (container / "cpu.max").read_text() == "25000 100000"


def test_without_writable_cgroups_the_node_polls(tmp_path: Path) -> None:
    (tmp_path / "memory").write_text("not a directory")  # creating a group there fails

    chosen = enforcer.detect(cluster="c", node="n", hierarchies=fake_v1(tmp_path))
    try:
        assert chosen.kind == "polling"
        assert "CPU limits not enforced" in chosen.describe()
    finally:
        chosen.close()


def test_a_forced_back_end_does_not_fall_back() -> None:
    with pytest.raises(RuntimeError, match="cgroup-v1 is not available"):
        enforcer.detect(cluster="c", node="n", force="cgroup-v1", hierarchies=[])
    with pytest.raises(ValueError):
        enforcer.detect(cluster="c", node="n", force="cgroup-v3", hierarchies=[])
    with pytest.raises(ValueError):
        enforcer.detect(cluster="c", node="../n", hierarchies=[])


def test_cluster_keys_differ_per_state_directory(tmp_path: Path) -> None:
    assert enforcer.cluster_key(tmp_path / "a") != enforcer.cluster_key(tmp_path / "b")
    assert enforcer.cluster_key(tmp_path / "a") == enforcer.cluster_key(tmp_path / "x" / ".." / "a")
