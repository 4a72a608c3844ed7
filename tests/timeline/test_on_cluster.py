"""``trainctl run --timeline`` and ``trainctl timeline`` on the embedded cluster, with real jobs.

The first job has a Master and two Workers; Worker 0 dies once with a retryable exit code, so
the controller deletes and re-creates it, and the Master waits for the re-created Worker
before it finishes. Both timelines must show a row per pod; the one recorded live also shows
the re-creation, which the API no longer holds once it happened. Then a job is deleted and
created again under its name: each timeline of the second must hold only the second's pods,
Events and time.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from trainctl.api import constants as c
from trainctl.cluster.local_cluster import LocalCluster
from trainctl.kube.restmapper import PYTORCHJOBS
from trainctl.launch import Launcher, Outcome, PlainView, connect
from trainctl.launch.job_kinds import kind_of
from trainctl.timeline import fetch, model
from trainctl.timeline.live_recorder import TimelineRecorder

from tests.support.net import free_port
from tests.support.pods import pod_scratch

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


def pytorch(command: list[str]) -> dict:
    """The job's container, on a port of its own: the default 23456 may be held by another program on this machine."""
    return {"name": "pytorch", "image": "python:3.11", "command": command, "ports": [{"name": c.PYTORCH_PORT_NAME, "containerPort": free_port("0.0.0.0")}]}


def job(name: str, scratch: Path) -> dict:
    def replica(count: int, command: list[str]) -> dict:
        container = pytorch(command)
        return {"replicas": count, "restartPolicy": "ExitCode", "template": {"spec": {"containers": [container]}}}

    first, recovered = str(scratch / f"{name}.first"), str(scratch / f"{name}.recovered")
    worker = [sys.executable, "-c", WORKER, first, recovered]
    return pytorchjob(
        name,
        runPolicy={"cleanPodPolicy": "None"},
        pytorchReplicaSpecs={
            "Master": replica(1, [sys.executable, "-c", MASTER, recovered]),
            # RANK tells the script which worker it is.
            "Worker": replica(2, ["sh", "-c", 'exec "$0" "$@" "${RANK:-0}"', *worker]),
        },
    )


def pytorchjob(name: str, **spec: object) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}


def trainctl(cluster: LocalCluster, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env.update(KUBECONFIG=str(cluster.kubeconfig), HOME=str(home))
    return subprocess.run([sys.executable, "-m", "trainctl.cli.main", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=150)


def svg_ids(svg: str) -> set[str]:
    return {el.get("id") for el in ET.fromstring(svg).iter() if el.get("id")}


def test_run_records_a_timeline_and_timeline_redraws_it_from_the_cluster(cluster, tmp_path):
    name = f"tl-{uuid.uuid4().hex[:6]}"
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job(name, pod_scratch(cluster.directory))))
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


def sleeper(name: str, *, workers: int, clean_pod_policy: str) -> dict:
    """A job whose pods say their world size and run long enough for the job to be Running."""
    code = "import os, time; print('WORLD_SIZE=' + os.environ['WORLD_SIZE'], flush=True); time.sleep(3)"
    replica = {"restartPolicy": "Never", "template": {"spec": {"containers": [pytorch([sys.executable, "-c", code])]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": clean_pod_policy},
            "pytorchReplicaSpecs": {"Master": {**replica, "replicas": 1}, "Worker": {**replica, "replicas": workers}},
        },
    }


@pytest.mark.timeout(300)
def test_a_job_created_again_under_its_name_has_a_timeline_of_its_own(cluster, tmp_path):
    name = f"again-{uuid.uuid4().hex[:6]}"
    # The first job: three pods, which the controller deletes at the end (SuccessfulDeletePod).
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump(sleeper(name, workers=2, clean_pod_policy="All")))
    done = trainctl(cluster, tmp_path, "run", "-f", str(first), "--timeout", "120s")
    assert done.returncode == 0, done.stdout + done.stderr
    deleted = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "delete", "pytorchjob", name, "-n", "default"], capture_output=True, text=True, timeout=60
    )
    assert deleted.returncode == 0, deleted.stderr

    # The second, under the same name: two pods, kept at the end; recorded as run --timeline does.
    launcher = Launcher(connect(str(cluster.kubeconfig)))
    recorder = TimelineRecorder(container="pytorch")
    result = launcher.launch(sleeper(name, workers=1, clean_pod_policy="None"), "default", PlainView(io.StringIO()), timeout=120, observer=recorder)
    assert result.outcome is Outcome.SUCCEEDED, result.message
    job = launcher.client.get(PYTORCHJOBS, "default", name)
    recorded = recorder.timeline(events=fetch.job_events(launcher.client, job))
    redrawn = fetch.timeline(launcher.client, kind_of(job), job, now=time.time())

    created = model.parse_time(job["metadata"]["creationTimestamp"])
    pods = {f"{name}-master-0", f"{name}-worker-0"}
    for timeline in (recorded, redrawn):
        assert {row.pod for row in timeline.rows} == pods
        assert [(row.pod, m) for row in timeline.rows for m in row.marks if m.kind == "deleted"] == []
        assert timeline.start == created
        running = [span for type_, span in timeline.condition_spans() if type_ == "Running"]
        assert running and all(span.end > span.start for span in running), timeline.conditions
        assert [w.size for w in timeline.world_size] == [2]

    done = trainctl(cluster, tmp_path, "timeline", name, "-n", "default", "-o", str(tmp_path / "second.svg"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"wrote {tmp_path / 'second.svg'}: 2 pod row(s)")


# A Worker that waits for the rendezvous store to answer (so the store has run), then succeeds.
ELASTIC_WORKER = """\
import os, socket, time
host, port = os.environ["PET_RDZV_ENDPOINT"].rsplit(":", 1)
deadline = time.monotonic() + 120
while True:
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
print("WORLD_SIZE=" + os.environ.get("WORLD_SIZE", "?"), flush=True)
"""


def elastic(name: str) -> dict:
    worker = {"restartPolicy": "OnFailure", "replicas": 2, "template": {"spec": {"containers": [pytorch([sys.executable, "-c", ELASTIC_WORKER])]}}}
    return pytorchjob(
        name,
        runPolicy={"cleanPodPolicy": "None"},
        elasticPolicy={"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 2},
        pytorchReplicaSpecs={"Worker": worker},
    )


@pytest.mark.timeout(300)
def test_an_elastic_jobs_workers_and_rendezvous_store_are_drawn_as_they_ran(cluster, tmp_path):
    """Workers that ran once and succeeded show no restart; the store, deleted when the job ends, its node and run."""
    name = f"el-{uuid.uuid4().hex[:6]}"
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(elastic(name)))
    workers = [f"{name}-worker-0", f"{name}-worker-1"]

    recorded = tmp_path / "run.svg"
    done = trainctl(cluster, tmp_path, "run", "-f", str(manifest), "--timeout", "200s", "--timeline", str(recorded))
    assert done.returncode == 0, done.stdout + done.stderr
    replicas = next(line for line in done.stdout.splitlines() if line.strip().startswith("replicas:"))
    assert replicas.split(":", 1)[1].strip() == "Worker 2 succeeded", done.stdout
    found = svg_ids(recorded.read_text())
    assert {f"row:{pod}" for pod in [*workers, f"{name}-rdzv"]} <= found, sorted(found)
    for pod in workers:
        assert not any(i.startswith((f"mark:{pod}:restart:", f"span:{pod}:Waiting")) for i in found), sorted(found)
        assert f"span:{pod}:Succeeded" in found, sorted(found)

    redrawn = tmp_path / "later.png"
    done = trainctl(cluster, tmp_path, "timeline", name, "-n", "default", "-o", str(redrawn))
    assert done.returncode == 0, done.stdout + done.stderr
    assert redrawn.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    client = Launcher(connect(str(cluster.kubeconfig))).client
    job = client.get(PYTORCHJOBS, "default", name)
    deadline = time.monotonic() + 60
    while any(p["metadata"]["name"] == f"{name}-rdzv" for p in fetch.owned_pods(client, job)) and time.monotonic() < deadline:
        time.sleep(0.5)  # the store is deleted once the job finished: then only its Events tell of it
    rows = {row.pod: row for row in fetch.timeline(client, kind_of(job), job, now=time.time()).rows}
    store = rows[f"{name}-rdzv"]
    assert store.nodes and store.replica_type == "rendezvous", store
    assert model.RUNNING in {s.phase for s in store.spans} and model.UNKNOWN not in {s.phase for s in store.spans}, store
    for pod in workers:
        assert [s.phase for s in rows[pod].spans][-1] == model.SUCCEEDED and rows[pod].restarts == 0, rows[pod]
