"""``trainctl run --timeline`` and ``trainctl timeline`` on the embedded cluster, with a real job.

The job has a Master and two Workers; Worker 0 dies once with a retryable exit code, so the
controller deletes and re-creates it, and the Master waits for the re-created Worker before
it finishes. Both timelines must show a row per pod; the one recorded live also shows
the re-creation, which the API no longer holds once it happened.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from trainctl.cluster.cluster import LocalCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]

MASTER = """\
import os, pathlib, sys, time
print(f"[start] RANK=0 WORLD_SIZE={os.environ['WORLD_SIZE']}", flush=True)
recovered = pathlib.Path(sys.argv[1])
deadline = time.monotonic() + 60
while not recovered.exists() and time.monotonic() < deadline:
    time.sleep(0.1)
print("[done] world_size=" + os.environ["WORLD_SIZE"], flush=True)
"""

WORKER = """\
import pathlib, sys
first, recovered = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
worker_0 = sys.argv[3] == "1"  # RANK: the Master is 0, Worker i is i + 1
if worker_0 and not first.exists():
    first.touch(); print("worker dies", flush=True); sys.exit(137)
if worker_0:
    recovered.touch()
print("worker done", flush=True)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), controller=True, workdir=REPO, backoff_base=0.2) as running:
        yield running


def job(name: str, scratch: Path) -> dict:
    def replica(count: int, command: list[str]) -> dict:
        container = {"name": "pytorch", "image": "python:3.11", "command": command}
        return {"replicas": count, "restartPolicy": "ExitCode", "template": {"spec": {"containers": [container]}}}

    first, recovered = str(scratch / "first"), str(scratch / "recovered")
    worker = [sys.executable, "-c", WORKER, first, recovered]
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {
                "Master": replica(1, [sys.executable, "-c", MASTER, recovered]),
                # RANK tells the script which worker it is.
                "Worker": replica(2, ["sh", "-c", 'exec "$0" "$@" "${RANK:-0}"', *worker]),
            },
        },
    }


def trainctl(cluster: LocalCluster, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env.update(KUBECONFIG=str(cluster.kubeconfig), HOME=str(home))
    return subprocess.run([sys.executable, "-m", "trainctl.cli.main", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=150)


def svg_ids(svg: str) -> set[str]:
    return {el.get("id") for el in ET.fromstring(svg).iter() if el.get("id")}


def test_run_records_a_timeline_and_timeline_redraws_it_from_the_cluster(cluster, tmp_path):
    name = f"tl-{uuid.uuid4().hex[:6]}"
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job(name, tmp_path)))
    pods = {f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"}

    recorded = tmp_path / "run.svg"
    done = trainctl(cluster, tmp_path, "run", "-f", str(manifest), "--timeout", "120s", "--timeline", str(recorded))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"timeline: {recorded} (3 pod row(s))" in done.stdout
    found = svg_ids(recorded.read_text())
    assert {i for i in found if i.startswith("row:")} == {f"row:{pod}" for pod in pods}
    assert any(i.startswith(f"mark:{name}-worker-0:recreated:") for i in found), sorted(found)
    assert {f"span:{pod}:Succeeded" for pod in pods} <= found
    assert {"condition:Created", "condition:Running", "condition:Succeeded", "world-size"} <= found
    assert "Failed: Error (exit 137)" in recorded.read_text()

    redrawn = tmp_path / "later.html"
    done = trainctl(cluster, tmp_path, "timeline", name, "-n", "default", "-o", str(redrawn))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"wrote {redrawn}: 3 pod row(s)")
    page = redrawn.read_text()
    found = svg_ids(page[page.index("<svg") : page.index("</svg>") + len("</svg>")])
    assert {i for i in found if i.startswith("row:")} == {f"row:{pod}" for pod in pods}
    assert {"condition:Succeeded", "world-size"} <= found  # world size from the logs, read with timestamps
    assert f"<title>Timeline of PyTorchJob default/{name}</title>" in page


def test_timeline_of_a_missing_job_is_one_line(cluster, tmp_path):
    done = trainctl(cluster, tmp_path, "timeline", "nosuchjob", "--kind", "msjob")
    assert done.returncode == 1
    assert done.stderr == "error: no MSJob default/nosuchjob\n"
