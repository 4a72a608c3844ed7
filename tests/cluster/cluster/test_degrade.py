"""``node degrade`` and ``restore`` without a cluster: the packet loss rules the router writes,
packet delay where the kernel has no netem, what the command accepts, and the CPU cap asked
of the node's kubelet and lifted again (a watcher in the test stands for the kubelet)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Optional

import pytest

from trainctl.cli.main import main
from trainctl.cluster import machines
from trainctl.cluster.compute import cpu_cap
from trainctl.cluster.faults import degrade as node_degrade
from trainctl.cluster.machines import NodeError
from trainctl.cluster.network import degrade

NODE = "trainctl-local-2"


def test_loss_rules_drop_a_share_of_each_degraded_nodes_pod_links_both_ways() -> None:
    script = degrade.ruleset({"a": (30, ["vh3", "vh1"]), "b": (100, ["vh2"]), "c": (50, []), "d": (0, ["vh4"])})
    assert 'iifname { "vh1", "vh3" } numgen random mod 100 < 30 drop comment "a"' in script
    assert 'oifname { "vh1", "vh3" } numgen random mod 100 < 30 drop comment "a"' in script
    assert 'iifname { "vh2" } drop comment "b"' in script and 'oifname { "vh2" } drop comment "b"' in script
    assert '"c"' not in script and "vh4" not in script  # no pods, or no loss: no rule
    assert script.startswith("add table bridge trainctl_degrade\ndelete table bridge trainctl_degrade\n")


def test_the_loss_rules_are_valid_for_nft() -> None:
    script = degrade.ruleset({"a": (30, ["vh0", "vh1"]), "b": (100, ["vh2"])})
    check = subprocess.run(["unshare", "-U", "-r", "-n", "nft", "-c", "-f", "-"], input=script, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr


def test_delay_is_a_netem_queue_on_the_pod_link_and_lifting_it_removes_the_queue() -> None:
    assert degrade.delay_argv("vh3", 100) == ["tc", "qdisc", "replace", "dev", "vh3", "root", "netem", "delay", "100ms"]
    assert degrade.delay_argv("vh3", 0) == ["tc", "qdisc", "del", "dev", "vh3", "root"]


def test_a_kernel_without_netem_is_named_as_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(argv: list[str]) -> str:
        return "Error: Specified qdisc kind is unknown." if "netem" in argv else ""
    monkeypatch.setattr(degrade, "_run", run)
    missing = degrade.netem_missing()
    assert missing is not None and "no sch_netem" in missing and "Specified qdisc kind is unknown" in missing
    monkeypatch.setattr(degrade, "_run", lambda argv: "")
    assert degrade.netem_missing() is None


def test_netem_is_detected_in_a_namespace_of_our_own() -> None:
    """Whatever this kernel has: the probe answers, and names netem when it refuses."""
    probe = subprocess.run(["unshare", "-U", "-r", "-n", sys.executable, "-c",
                            "from trainctl.cluster.network.degrade import netem_missing; print(netem_missing())"],
                           capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "None" or "netem" in probe.stdout


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    machines.write_nodes(tmp_path, machines.node_specs(2))
    return tmp_path


@pytest.mark.parametrize(("options", "error"), [
    ({}, "say how to degrade the node"),
    ({"cpu": 0}, "--cpu must be from 1 to 100"),
    ({"cpu": "fast"}, "--cpu must be a whole percent"),
    ({"net_loss": 101}, "--net-loss must be a whole percent"),
    ({"net_delay": "soon"}, "--net-delay must be a duration"),
])
def test_a_degrade_that_cannot_be_done_is_refused_before_anything_changes(directory: Path, options: dict[str, Any],
                                                                          error: str) -> None:
    with pytest.raises(NodeError, match=error):
        node_degrade.degrade_node(directory, NODE, **options)
    assert node_degrade.degradation(directory, NODE) == {}
    assert cpu_cap.read_request(directory, NODE) == (0, None)


class Kubelet:
    """Answers the node's CPU cap requests as its kubelet does, until stopped."""

    def __init__(self, directory: Path, refuse: str = "") -> None:
        self.caps: list[Optional[int]] = []
        self.refuse = refuse
        self.watcher = cpu_cap.CapWatcher(directory, NODE, self)
        self.watcher.start()

    def cap_cpu(self, percent: Optional[int]) -> None:
        if self.refuse and percent is not None:
            raise cpu_cap.CpuCapUnsupported(self.refuse)
        self.caps.append(percent)


def test_a_cpu_cap_is_applied_by_the_nodes_kubelet_and_restore_lifts_it(directory: Path) -> None:
    kubelet = Kubelet(directory)
    try:
        assert node_degrade.degrade_node(directory, NODE, cpu="20%") == {"cpu": 20}
        assert kubelet.caps == [20]
        assert node_degrade.describe(node_degrade.degradation(directory, NODE)) == "degraded: cpu 20%"
        node_degrade.restore_node(directory, NODE)
        assert kubelet.caps == [20, None] and node_degrade.degradation(directory, NODE) == {}
        with pytest.raises(NodeError, match="is not degraded"):
            node_degrade.restore_node(directory, NODE)
    finally:
        kubelet.watcher.stop()


def test_a_node_that_cannot_cap_cpu_refuses_and_keeps_no_request(directory: Path) -> None:
    kubelet = Kubelet(directory, refuse="this node enforces no CPU limits (polling)")
    try:
        with pytest.raises(NodeError, match="CPU cap refused: this node enforces no CPU limits"):
            node_degrade.degrade_node(directory, NODE, cpu=20)
        assert node_degrade.degradation(directory, NODE) == {}
        assert cpu_cap.read_request(directory, NODE)[1] is None  # a later kubelet finds nothing to apply
    finally:
        kubelet.watcher.stop()


def test_a_killed_nodes_cap_waits_for_its_kubelet_and_a_new_run_forgets_it(directory: Path) -> None:
    machines.set_state(directory, NODE, machines.KILLED)
    node_degrade.degrade_node(directory, NODE, cpu=30)  # no kubelet answers: it applies the cap when it boots
    assert cpu_cap.read_request(directory, NODE)[1] == 30
    node_degrade.forget_degradation(directory, NODE)
    assert cpu_cap.read_request(directory, NODE) == (0, None) and node_degrade.degradation(directory, NODE) == {}


def test_link_faults_need_the_isolated_network(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No router answers here, as on the shared network: the command says what it needs."""
    assert main(["local", "node", "degrade", NODE, "--net-loss", "100", "--dir", str(directory)]) == 1
    assert "a degraded data link needs the isolated pod network" in capsys.readouterr().err
    assert node_degrade.degradation(directory, NODE) == {}


def test_the_pod_commands_need_a_pod_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["local", "pod", "freeze"])
    assert "name" in capsys.readouterr().err


def test_restore_waits_for_the_kubelet_while_it_runs(directory: Path) -> None:
    """``restore`` returns once the cap is lifted, not when it is merely asked for."""
    kubelet = Kubelet(directory)
    try:
        node_degrade.degrade_node(directory, NODE, cpu=50)
        kubelet.watcher.stop()
        done = threading.Event()
        restorer = threading.Thread(target=lambda: (node_degrade.restore_node(directory, NODE), done.set()))
        restorer.start()
        assert not done.wait(1.0)  # nobody answers
        kubelet.watcher.check()
        restorer.join(timeout=30)
        assert done.is_set() and kubelet.caps == [50, None]
    finally:
        kubelet.watcher.stop()
