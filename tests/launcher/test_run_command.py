"""``trainctl run``: input checking, exit codes, summary, --timeout, --replace and Ctrl-C.

Bad input needs no cluster. The rest runs the real command as a subprocess against the
real API server, with the ``StatusDriver`` standing in for the controller.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from trainctl.cli import run as run_command
from trainctl.cli.main import main
from trainctl.kube.client import ApiError

from tests.support.conditions import true_condition
from tests.support.jobs import unique
from tests.support.launch import StatusDriver, launched_job
from tests.support.repo import REPO

pytestmark = pytest.mark.timeout(90)

BAD = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: bad}
spec:
  pytorchReplicaSpecs:
    Master: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: x}]}}}
---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: good}
spec:
  pytorchReplicaSpecs:
    Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}
---
kind: [unclosed
"""


def test_bad_input_is_rejected_with_the_same_lines_as_validate(tmp_path, capsys):
    path = tmp_path / "jobs.yaml"
    path.write_text(BAD)
    assert main(["validate", "-f", str(path)]) == 1
    validate_err = capsys.readouterr().err
    assert main(["run", "-f", str(path)]) == 1
    run = capsys.readouterr()
    assert run.err == validate_err
    assert "PyTorchJob/bad: spec.pytorchReplicaSpecs[Master].replicas: must be 1" in run.err
    assert f"{path}: document 3 (line 14): line 15, column 16:" in run.err
    assert "Traceback" not in run.err and run.out == ""


def test_unreadable_and_empty_input_are_one_line_each(tmp_path, capsys):
    assert main(["run", "-f", str(tmp_path / "missing.yaml")]) == 1
    assert capsys.readouterr().err == f"{tmp_path / 'missing.yaml'}: cannot read: No such file or directory\n"
    empty = tmp_path / "empty.yaml"
    empty.write_text("---\n")
    assert main(["run", "-f", str(empty)]) == 1
    assert capsys.readouterr().err == f"{empty}: no objects found\n"


def test_bad_timeout_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "-f", "x.yaml", "--timeout", "soon"])
    assert exit_.value.code == 2
    assert "invalid duration 'soon'" in capsys.readouterr().err


def test_a_timeline_file_of_no_known_format_is_a_usage_error_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "-f", str(tmp_path / "missing.yaml"), "--timeline", str(tmp_path / "elastic.jpg")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"cannot write a timeline to {tmp_path / 'elastic.jpg'}: .jpg is not a format" in err and "use .svg, .html, .htm, .png, .pdf" in err
    assert "cannot read" not in err  # refused before the manifest is read, let alone a job created


class LogStream(list):
    def close(self) -> None:
        pass


class PodLogs:
    """The part of a launcher ``_save_logs`` reads: ``client.log``; pods not in ``logs`` are gone (404)."""

    def __init__(self, logs: dict[str, list[str]]) -> None:
        self.client = self
        self.logs = logs

    def log(self, namespace: str, pod: str) -> LogStream:
        if pod not in self.logs:
            raise ApiError(404, "NotFound", f'pods "{pod}" not found')
        return LogStream(self.logs[pod])


def test_a_throwaway_clusters_logs_are_kept_under_tmpdir_and_no_directory_is_made_for_none(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    ended = SimpleNamespace(namespace="default", name="mnist", pods=["mnist-master-0", "mnist-worker-0"])
    assert run_command._save_logs(PodLogs({}), [ended]) == {}
    assert list(tmp_path.iterdir()) == []  # nothing to keep, nothing left behind
    saved = run_command._save_logs(PodLogs({"mnist-master-0": ["step 1", "done"]}), [ended])
    (path,) = saved[("default", "mnist")]
    assert path.parent.parent == tmp_path and path.parent.name.startswith(run_command.LOGS_PREFIX)
    assert path.read_text() == "step 1\ndone\n"


class RunProcess:
    """``trainctl run`` as a user starts it, with its stdout read line by line."""

    def __init__(self, kubeconfig: Path, home: Path, job: dict, *args: str) -> None:
        manifest = home / "job.yaml"
        manifest.write_text(yaml.safe_dump(job))
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trainctl.cli.main", "run", "-f", str(manifest), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
            # As from a terminal: a shell starts background jobs with SIGINT ignored, and a
            # suite run in the background would hand that on, so Ctrl-C could not be tested.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = 90.0) -> None:
        with self._changed:
            found = self._changed.wait_for(lambda: any(text in line for line in self.lines), timeout)
        assert found, "\n".join(self.lines)

    def finish(self, timeout: float = 90.0) -> tuple[int, str, str]:
        code = self.process.wait(timeout)
        err = self.process.stderr.read()
        self._reader.join(timeout)
        return code, "\n".join(self.lines), err


@pytest.fixture
def run_job(apiserver, kube, tmp_path):
    processes: list[RunProcess] = []

    def start(job: dict, *args: str) -> RunProcess:
        process = RunProcess(Path(apiserver.kubeconfig), tmp_path, job, *args)
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.process.poll() is None:
            process.process.kill()
            process.process.wait()


def test_success_exits_0_with_a_summary(run_job, driver):
    name = unique("run-ok")
    run = run_job(launched_job(name))
    run.wait_for(f"created PyTorchJob default/{name}")
    driver.set_status(
        name, true_condition("Created", "created"), true_condition("Running", "running"), replicas={"Master": {"active": 1}}
    )
    run.wait_for("Running")
    driver.set_status(
        name, true_condition("Succeeded", f"PyTorchJob {name} is successfully completed."), replicas={"Master": {"succeeded": 1}}
    )
    code, out, err = run.finish()
    assert code == 0, err
    assert f"PyTorchJob default/{name} succeeded after" in out
    assert "condition: Succeeded (PyTorchJobSucceeded)" in out
    assert f"message:   PyTorchJob {name} is successfully completed." in out
    assert "replicas:  Master 1 succeeded" in out
    assert "restarts:  0" in out


def test_failure_exits_1_with_the_jobs_message(run_job, driver):
    name = unique("run-fail")
    run = run_job(launched_job(name))
    run.wait_for(f"created PyTorchJob default/{name}")
    message = f"PyTorchJob {name} is failed because 1 Master replica(s) failed."
    driver.set_status(name, true_condition("Failed", message), replicas={"Master": {"failed": 1}})
    code, out, _ = run.finish()
    assert code == 1
    assert f"PyTorchJob default/{name} failed after" in out and f"message:   {message}" in out


def test_timeout_exits_1_and_leaves_the_job(run_job, driver):
    name = unique("run-slow")
    run = run_job(launched_job(name), "--timeout", "1s")
    code, out, _ = run.finish()
    assert code == 1
    assert f"PyTorchJob default/{name} timed out after 1.0s" in out
    assert driver.exists(name)


def test_an_existing_job_is_a_clear_error_and_replace_recreates_it(run_job, driver):
    name = unique("run-twice")
    first = run_job(launched_job(name), "--timeout", "0.5s")
    assert first.finish()[0] == 1
    uid = driver.job(name)["metadata"]["uid"]

    code, out, err = run_job(launched_job(name)).finish()
    assert code == 1
    assert err == f"error: PyTorchJob default/{name} already exists; pass --replace to delete and recreate it\n"

    again = run_job(launched_job(name), "--replace", "--timeout", "5s")
    again.wait_for(f"created PyTorchJob default/{name}")
    driver.set_status(name, true_condition("Succeeded", "done"))
    assert again.finish()[0] == 0
    assert driver.job(name)["metadata"]["uid"] != uid


@pytest.mark.parametrize(
    ("signum", "keep"),
    [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["ctrl-c", "ctrl-c-keep", "sigterm"],
)
def test_ctrl_c_deletes_the_job_unless_keep(run_job, driver, signum, keep):
    name = unique("run-int")
    run = run_job(launched_job(name), *(["--keep"] if keep else []))
    run.wait_for(f"created PyTorchJob default/{name}")
    run.wait_for("Pending")
    run.process.send_signal(signum)
    code, out, _ = run.finish()
    assert code == 130
    assert f"PyTorchJob default/{name} interrupted" in out
    if keep:
        assert "(the job was kept: --keep)" in out and driver.exists(name)
    else:
        assert "(Ctrl-C: the job and its pods were deleted; --keep leaves them)" in out and not driver.exists(name)


def test_an_unreachable_cluster_is_one_line(tmp_path, monkeypatch, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(launched_job("x")))
    assert main(["run", "-f", str(job)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the API server at http://127.0.0.1:9: ") and err.count("\n") == 1


def test_a_broken_kubeconfig_is_one_line(tmp_path, monkeypatch, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [unclosed\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(launched_job("x")))
    assert main(["run", "-f", str(job)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot use kubeconfig {kubeconfig}: ") and err.count("\n") == 1


def test_an_unknown_field_is_refused_before_the_job_is_created_unless_validate_warn(run_job, driver):
    """As ``kubectl apply`` (strict field validation) refuses it; ``--validate=warn`` runs the job."""
    name = unique("run-typo")
    job = launched_job(name)
    job["spec"]["runPolicy"] = {"backofLimit": 3}
    code, out, err = run_job(job).finish()
    assert code == 1 and out == ""
    assert err == f'PyTorchJob/{name}: unknown field "spec.runPolicy.backofLimit"; did you mean "backoffLimit"?\n'
    assert not driver.exists(name)
    run = run_job(job, "--validate=warn")
    run.wait_for(f"created PyTorchJob default/{name}")
    driver.set_status(name, true_condition("Succeeded", "done"), replicas={"Master": {"succeeded": 1}})
    code, _, err = run.finish()
    assert code == 0
    assert f'PyTorchJob/{name}: warning: unknown field "spec.runPolicy.backofLimit"; did you mean "backoffLimit"?' in err


def test_namespace_flag_puts_the_job_there(run_job, kube, driver):
    from kubernetes import client

    client.CoreV1Api(kube).create_namespace({"metadata": {"name": "team-a"}})
    name = unique("run-ns")
    run = run_job(launched_job(name), "--namespace", "team-a", "--timeout", "20s")
    run.wait_for(f"created PyTorchJob team-a/{name}")
    team_a = StatusDriver(kube, namespace="team-a")
    team_a.set_status(name, true_condition("Succeeded", "done"))
    code, out, err = run.finish()
    assert code == 0, err
    assert f"PyTorchJob team-a/{name} succeeded" in out
    assert not driver.exists(name)  # not in the kubeconfig's namespace
