"""Every controller setting is a flag whose default comes from the options object."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from trainctl.controller import options
from trainctl.controller.options import ManagerOptions
from trainctl.controller.reconcile.config import ReconcileConfig, setting


def parse(*argv: str) -> ManagerOptions:
    parser = argparse.ArgumentParser()
    options.add_flags(parser)
    return options.from_args(parser.parse_args(list(argv)))


def test_no_flags_give_the_dataclass_defaults(monkeypatch):
    monkeypatch.delenv("KUBEFLOW_NAMESPACE", raising=False)
    assert parse() == ManagerOptions()
    assert parse().reconcile == ReconcileConfig()


def test_every_field_of_both_dataclasses_has_a_flag():
    parser = argparse.ArgumentParser()
    options.add_flags(parser)
    dests = {action.dest for action in parser._actions}
    manager = {f.name for f in dataclasses.fields(ManagerOptions)} - {"reconcile"}
    assert manager <= dests
    assert {f.name for f in dataclasses.fields(ReconcileConfig)} <= dests


def test_every_flag_says_what_it_does_from_its_setting():
    parser = argparse.ArgumentParser()
    options.add_flags(parser)
    # the gang scheduler, in both, is the manager's flag
    described = {f.name: f.metadata.get("help") for cls in (ReconcileConfig, ManagerOptions)
                 for f in dataclasses.fields(cls)}
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert described[action.dest], f"{action.option_strings[0]} has no help text"
        assert action.help.startswith(described[action.dest])


def test_reconcile_settings_reach_the_core():
    parsed = parse("--init-container-image", "busybox:1.36", "--rdzv-join-timeout", "60",
                   "--force-delete-grace-seconds", "12.5", "--rdzv-store-memory", "1Gi")
    assert parsed.reconcile.init_container_image == "busybox:1.36"
    assert parsed.reconcile.rdzv_join_timeout == 60
    assert parsed.reconcile.force_delete_grace_seconds == 12.5
    assert parsed.reconcile.rdzv_store_memory == "1Gi"


def test_manager_settings_and_renamed_flags():
    parsed = parse("--workers", "2", "--status-batch-period", "0.5", "--leader-elect",
                   "--leader-elect-namespace", "ops", "--leader-elect-name", "lock", "--log-format", "json")
    assert (parsed.workers, parsed.status_batch_period, parsed.leader_elect) == (2, 0.5, True)
    assert (parsed.lease_namespace, parsed.lease_name, parsed.log_format) == ("ops", "lock", "json")


def test_the_gang_scheduler_flag_configures_manager_and_core_alike():
    parsed = parse("--gang-scheduler", "volcano")
    assert parsed.gang_scheduler == parsed.reconcile.gang_scheduler == "volcano"
    assert ManagerOptions(gang_scheduler="coscheduler").reconcile.gang == "coscheduler"


def test_the_namespace_default_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("KUBEFLOW_NAMESPACE", "kubeflow")
    assert parse().namespace == "kubeflow"
    assert parse("--namespace", "other").namespace == "other"


@pytest.mark.parametrize("argv", [("--workers", "0"), ("--qps", "-1"), ("--rdzv-join-timeout", "soon"),
                                  ("--node-lost-grace", "soon")])
def test_bad_values_are_refused_by_the_parser(argv, capsys):
    with pytest.raises(SystemExit):
        parse(*argv)
    assert argv[0] in capsys.readouterr().err


def test_a_new_reconcile_field_gets_its_flag(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Grown(ReconcileConfig):
        max_pods_per_node: int = setting(10, "place at most this many of a job's pods on one node")

    monkeypatch.setattr(options, "ReconcileConfig", Grown)
    parser = argparse.ArgumentParser()
    options.add_flags(parser)
    args = parser.parse_args(["--max-pods-per-node", "7"])
    assert args.max_pods_per_node == 7


def test_a_setting_without_help_text_is_refused_when_the_flags_are_made(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Undescribed(ReconcileConfig):
        max_pods_per_node: int = 10

    monkeypatch.setattr(options, "ReconcileConfig", Undescribed)
    with pytest.raises(TypeError, match="max_pods_per_node has no help text"):
        options.add_flags(argparse.ArgumentParser())


@pytest.mark.parametrize(("argv", "grace"), [((), 30.0), (("--node-lost-grace", "5s"), 5.0),
                                             (("--node-lost-grace", "2m"), 120.0), (("--node-lost-grace", "never"), None)])
def test_node_lost_grace_is_a_duration_or_never(argv, grace):
    assert parse(*argv).reconcile.node_lost_grace_seconds == grace


@pytest.mark.parametrize(("argv", "rule"), [
    (("--oom-memory-factor", "inf"), "must be a number above 1 and at most 16, got 'inf'"),
    (("--oom-memory-factor", "nan"), "must be a number above 1 and at most 16, got 'nan'"),
    (("--oom-memory-factor", "1e308"), "must be a number above 1 and at most 16, got '1e308'"),
    (("--oom-memory-factor", "0.5"), "must be a number above 1 and at most 16, got '0.5'"),
    (("--oom-memory-max", "-1Gi"), "must be a positive memory quantity (such as 8Gi), got '-1Gi'"),
    (("--oom-memory-max", "lots"), "must be a positive memory quantity (such as 8Gi), got 'lots'"),
])
def test_oom_relaunch_flags_no_job_could_use_are_refused_at_start_up(argv, rule, capsys):
    with pytest.raises(SystemExit):
        parse("=".join(argv))  # "--oom-memory-max=-1Gi": a value argparse does not take for a flag
    assert f"argument {argv[0]}: {rule}" in capsys.readouterr().err


def test_a_reconcile_config_no_job_could_use_is_refused_when_made():
    with pytest.raises(ValueError, match="oom_memory_factor must be a number above 1 and at most 16, got inf"):
        ReconcileConfig(oom_memory_factor=float("inf"))
    with pytest.raises(ValueError, match="oom_memory_max must be a positive memory quantity"):
        ReconcileConfig(oom_memory_max="-1Gi")


def test_oom_relaunch_flags_opt_every_job_in():
    assert (ReconcileConfig().oom_memory_factor, ReconcileConfig().oom_memory_max) == (None, None)
    parsed = parse("--oom-memory-factor", "1.5", "--oom-memory-max", "4Gi")
    assert (parsed.reconcile.oom_memory_factor, parsed.reconcile.oom_memory_max) == (1.5, "4Gi")
