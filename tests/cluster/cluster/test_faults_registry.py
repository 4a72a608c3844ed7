"""The node fault registry and the supervisor's options, without a cluster: a registered
fault kind becomes a ``trainctl local node`` subcommand whose flags reach it, every fault names
a registered kind that undoes it, and ``up --detach`` hands its background supervisor the
options it was given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainctl.cli.main import build_parser, main
from trainctl.cluster import faults, machines
from trainctl.cluster.faults import NODE_FAULTS, FaultFlag, NodeFault
from trainctl.cluster.supervisor import UpOptions


def test_every_fault_is_undone_by_a_registered_kind_that_mends() -> None:
    undone = {fault.name: fault.undo for fault in NODE_FAULTS.values() if fault.undo}
    assert undone == {"kill": "start", "freeze": "thaw", "partition": "heal", "degrade": "restore", "preempt": "start"}
    assert all(NODE_FAULTS[mend].undo == "" for mend in undone.values())


def test_a_kind_is_registered_once() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        faults.register(NODE_FAULTS["kill"])


def test_a_registered_fault_is_a_node_subcommand_whose_flags_reach_it(tmp_path: Path, monkeypatch: Any,
                                                                      capsys: Any) -> None:
    applied: list[tuple[Path, str, dict[str, Any]]] = []

    def degrade(host: faults.NodeHost, node: str, **options: Any) -> None:
        applied.append((host.directory, node, options))

    fault = NodeFault("degrade", "the machine slows down", "Node {node} degraded.", degrade, undo="restore",
                      flags=(FaultFlag("--cpu", "cpu", "the CPU share left"),))
    monkeypatch.setitem(NODE_FAULTS, "degrade", fault)
    machines.write_nodes(tmp_path, machines.node_specs(2, ["a", "b"]))
    assert main(["local", "node", "degrade", "b", "--cpu", "0.5", "--dir", str(tmp_path)]) == 0
    assert applied == [(tmp_path.resolve(), "b", {"cpu": "0.5"})]
    assert capsys.readouterr().out.strip() == "Node b degraded."
    assert main(["local", "node", "degrade", "c", "--dir", str(tmp_path)]) == 1  # no such node: refused first
    assert len(applied) == 1 and "no node 'c'" in capsys.readouterr().err


def test_start_without_a_supervisor_says_so_and_changes_nothing(tmp_path: Path, capsys: Any) -> None:
    machines.write_nodes(tmp_path, machines.node_specs(1))
    machines.set_state(tmp_path, machines.DEFAULT_NODE_NAME, machines.KILLED)
    assert main(["local", "node", "start", machines.DEFAULT_NODE_NAME, "--dir", str(tmp_path)]) == 1
    assert "no local cluster is running" in capsys.readouterr().err
    assert machines.node_state(tmp_path, machines.DEFAULT_NODE_NAME) == machines.KILLED


def _up_options(*argv: str) -> UpOptions:
    return UpOptions.from_args(build_parser().parse_args(["local", "up", *argv]))


@pytest.mark.parametrize("argv", [
    (),
    ("--gpus", "2", "--npus", "1", "--no-controller", "--node-names", "a,b", "--node-cpu", "500m",
     "--node-memory", "1Gi", "--workdir", "/somewhere", "--node-lost-grace", "never",
     "--node-monitor-grace-period", "10s", "--hpa-sync-period", "2s", "--hpa-cpu-initialization-period", "1m",
     "--horizontal-pod-autoscaler-initial-readiness-delay", "10s", "--hpa-downscale-stabilization", "2m",
     "--hollow-nodes", "3", "--network", "shared"),
    ("--nodes", "3",),
])
def test_detached_up_hands_its_supervisor_the_options_it_was_given(argv: tuple[str, ...]) -> None:
    options = _up_options(*argv)
    assert _up_options(*options.to_argv()) == options


def test_the_control_plane_gets_the_hpa_settings_under_kube_controller_managers_names(tmp_path: Path) -> None:
    options = _up_options("--hpa-cpu-initialization-period", "1m", "--hpa-sync-period", "2s")
    assert options.controlplane_args() == ["--horizontal-pod-autoscaler-cpu-initialization-period", "1m"]
    cluster = options.cluster(tmp_path, die_with_supervisor=False)
    assert cluster.controller is not None and [spec.name for spec in cluster.nodes] == [machines.DEFAULT_NODE_NAME]
