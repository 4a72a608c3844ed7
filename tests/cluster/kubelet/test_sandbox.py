"""The pod sandbox: what bwrap is asked to mount, and a real sandbox seen from inside."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainctl.cluster.compute import container_limits as limits
from trainctl.cluster.compute import polling
from trainctl.cluster.kubelet import sandbox
from trainctl.cluster.kubelet.runtime import ContainerProcess, ProcessRegistry
from trainctl.cluster.kubelet.volumes import Mount

from tests.support.waiting import wait_on


def layout(tmp_path: Path) -> sandbox.SandboxLayout:
    cluster = tmp_path / "cluster"
    pod_dir = cluster / "pods" / "uid"
    for directory in (pod_dir / "tmp", pod_dir / "home", pod_dir / "serviceaccount", pod_dir / "volumes" / "cm",
                      cluster / "network"):
        directory.mkdir(parents=True)
    (cluster / "token").write_text("admin\n")
    (pod_dir / "serviceaccount" / "token").write_text("mine\n")
    (pod_dir / "volumes" / "cm" / "run.py").write_text("print('from the configmap')\n")
    os.chmod(cluster, 0o700)
    sandbox.chown_all((pod_dir / "tmp", pod_dir / "home"), sandbox.POD_USER)
    return sandbox.SandboxLayout(cluster_dir=cluster, tmp=pod_dir / "tmp", read_only=sandbox.python_paths(),
                                 own_read_only=[cluster / "network"], own_writable=[pod_dir / "home"],
                                 service_account=pod_dir / "serviceaccount",
                                 volumes=[Mount(pod_dir / "volumes" / "cm", "/opt", True)])


def test_the_cluster_directory_is_hidden_after_the_system_and_the_pods_own_paths_come_back(tmp_path: Path) -> None:
    plan = layout(tmp_path)
    args = sandbox.bwrap_args(plan).args
    hidden = args.index(str(plan.cluster_dir))
    assert args[hidden - 1] == "--tmpfs"
    assert args.index("/usr") < hidden < args.index(str(plan.own_writable[0]))
    assert args[args.index("/tmp") - 2] == "--bind"  # the pod's own /tmp, writable
    last_opt = len(args) - 1 - args[::-1].index("/opt")  # a readOnly volume at its mountPath, after /opt's
    assert args[last_opt - 2] == "--ro-bind" and args[last_opt - 1].startswith(sandbox.STAGE + "/")
    assert "/root" not in args and "/home" not in args


def pod_workdir_under_a_tmp_volume(tmp_path: Path) -> sandbox.SandboxLayout:
    """The layout of a pod with an emptyDir at /tmp whose working directory (the cluster's,
    a test's scratch directory) lies under /tmp on the machine."""
    plan = layout(tmp_path)
    workdir = tmp_path / "work"
    workdir.mkdir()
    workdir.chmod(0o755)  # the pods' user enters it
    (workdir / "train.py").write_text("print('from the working directory')\n")
    empty_dir = plan.tmp.parent / "volumes" / "scratch"
    empty_dir.mkdir()
    sandbox.chown_all([empty_dir], sandbox.POD_USER)
    plan.read_only.insert(0, workdir)
    plan.volumes.append(Mount(empty_dir, "/tmp", False))
    return plan


def test_a_volume_is_mounted_before_the_paths_inside_it(tmp_path: Path) -> None:
    plan = pod_workdir_under_a_tmp_volume(tmp_path)
    assert str(plan.read_only[0]).startswith("/tmp/")  # pytest's tmp_path, as a cluster's scratch workdir
    args = sandbox.bwrap_args(plan).args
    tmp_mounts = [i for i, arg in enumerate(args) if arg == "/tmp"]
    assert len(tmp_mounts) == 2  # the pod's own /tmp, then the volume over it
    assert tmp_mounts[-1] < args.index(str(plan.read_only[0]))


def test_a_symlinked_system_directory_is_followed_for_a_mount_point() -> None:
    expected = os.path.realpath("/var/run") + "/secrets/x" if os.path.islink("/var/run") else "/var/run/secrets/x"
    assert sandbox.sandbox_path("/var/run/secrets/x") == expected
    assert sandbox.sandbox_path("/opt/app") == "/opt/app"


def skip_without_a_sandbox() -> None:
    problem = sandbox.sandbox_problem() if os.getuid() == 0 else "the kubelet runs as root"
    if problem:
        pytest.skip(f"no sandbox here: {problem}")


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[sandbox.PodSandbox, sandbox.SandboxLayout]]:
    skip_without_a_sandbox()
    plan = layout(tmp_path)
    pod = sandbox.PodSandbox.start(plan, [], tmp_path / "sandbox.log")
    try:
        yield pod, plan
    finally:
        pod.stop()


def test_a_process_in_the_sandbox_is_nobody_and_sees_only_its_own(running: tuple[sandbox.PodSandbox,
                                                                                  sandbox.SandboxLayout]) -> None:
    pod, plan = running
    script = (f'id -u; cat {plan.cluster_dir}/token || echo no-admin-token; cat {sandbox.SERVICE_ACCOUNT_PATH}/token; '
              f'python3 /opt/run.py; echo x > {plan.own_writable[0]}/f && echo home-ok; echo y > /tmp/t; '
              'echo z > /usr/z || echo usr-read-only; ls /proc | grep -c "^[0-9]"; kill -9 1; nsenter -t 1 -m true '
              '|| echo no-nsenter')
    result = subprocess.run([*pod.enter_argv("/"), "sh", "-c", script], capture_output=True, text=True, timeout=60,
                            env={"PATH": os.environ["PATH"]})
    lines = result.stdout.split()
    assert lines[0] == str(sandbox.POD_USER), result
    assert "no-admin-token" in lines and "mine" in lines and "home-ok" in lines and "usr-read-only" in lines, result
    assert "no-nsenter" in lines, result
    assert (plan.tmp / "t").read_text() == "y\n"
    assert pod.alive()
    count = int(lines[lines.index("usr-read-only") + 1])
    assert count <= 5, result  # bwrap, the holder, sh and ls: no process of the machine's


def test_a_volume_at_tmp_leaves_the_working_directory_under_it_visible(tmp_path: Path) -> None:
    skip_without_a_sandbox()
    plan = pod_workdir_under_a_tmp_volume(tmp_path)
    pod = sandbox.PodSandbox.start(plan, [], tmp_path / "sandbox.log")
    try:
        result = subprocess.run([*pod.enter_argv(str(plan.read_only[0])), "sh", "-c", "python3 train.py; echo v > /tmp/v"],
                                capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    finally:
        pod.stop()
    assert "from the working directory" in result.stdout, result
    assert (plan.volumes[-1].source / "v").read_text() == "v\n"  # /tmp is the volume


def test_stopping_the_sandbox_ends_what_runs_in_it(running: tuple[sandbox.PodSandbox, sandbox.SandboxLayout]) -> None:
    pod, _ = running
    sleeper = subprocess.Popen([*pod.enter_argv("/"), "sleep", "600"])
    pod.stop()
    assert sleeper.wait(timeout=30) != 0
    assert not pod.alive()


def container_in(pod: sandbox.PodSandbox, tmp_path: Path, script: str) -> ContainerProcess:
    registry = ProcessRegistry(tmp_path / "processes")
    group = polling.PolledGroup(limits.ContainerLimits(), on_close=lambda _group: None)
    return ContainerProcess(["sh", "-c", script], {"PATH": os.environ["PATH"]}, "/", tmp_path / "logs" / "0.log",
                            registry, "uid", "main", group, enter=pod.enter_argv("/"), relay=True)


def test_a_stopped_container_drains_in_its_grace_period_and_its_own_exit_code_is_reported(
        running: tuple[sandbox.PodSandbox, sandbox.SandboxLayout], tmp_path: Path) -> None:
    pod, plan = running
    drained = plan.tmp / "drained"  # the pod's /tmp
    process = container_in(pod, tmp_path, 'trap "sleep 2; echo done > /tmp/drained; exit 7" TERM; '
                                          'echo ready; sleep 600 & wait $!')
    wait_on(threading.Condition(), lambda: b"ready" in (tmp_path / "logs" / "0.log").read_bytes(), 30, recheck=0.1)
    assert process.stop(grace_seconds=60) == 7  # not nsenter's own death by SIGTERM (143)
    assert drained.read_text() == "done\n"


def test_a_container_ended_by_the_stop_signal_reports_it(running: tuple[sandbox.PodSandbox, sandbox.SandboxLayout],
                                                         tmp_path: Path) -> None:
    pod, _ = running
    process = container_in(pod, tmp_path, "echo ready; exec sleep 600")
    wait_on(threading.Condition(), lambda: b"ready" in (tmp_path / "logs" / "0.log").read_bytes(), 30, recheck=0.1)
    assert process.stop(grace_seconds=60) == 128 + signal.SIGTERM


def test_a_private_working_directory_runs_pods_without_the_sandbox_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainctl.cluster.kubelet import sandbox as sb

    monkeypatch.setattr(sb, "sandbox_problem", lambda: None)  # as where bwrap runs

    private, shared = tmp_path / "private", tmp_path / "shared"
    private.mkdir(mode=0o700)
    shared.mkdir()
    shared.chmod(0o755)
    mode, why = sb.choose(sb.AUTO, private)
    assert mode == sb.NONE and "not readable by the pods' user (mode 700" in why
    with pytest.raises(ValueError, match="not readable"):
        sb.choose(sb.BWRAP, private)
    assert sb.workdir_problem(shared) is None
