"""A frozen rank (its processes SIGSTOPped, its node healthy) on the local cluster.

With ``trainctl.io/hang-timeout`` the controller finds the hang from the workers' CPU usage,
names the frozen pod in a ``JobHung`` Event, keeps every worker's Python stacks in a ConfigMap,
restarts the workers, and the job resumes from its checkpoint and Succeeds. Without the
annotation nothing of this happens: the job waits for its rank, as it always did, and
finishes once the rank is thawed.
"""

from __future__ import annotations

import signal
import time

import pytest
from kubernetes import client

from tests.support.cluster import E2E
from tests.support.conditions import condition
from tests.support.hang import JOB, MASTER, WORKER, ddp_job, job_events, poll, signal_container, step_of

pytestmark = pytest.mark.e2e

TIMEOUT = 30  # seconds: the job's hang timeout
# Detection is due within the timeout plus 30 s; the bound is far looser for a loaded machine.
DETECTED_BOUND = TIMEOUT + 120.0


@pytest.mark.timeout(900)
def test_a_frozen_rank_is_detected_named_dumped_restarted_and_the_job_succeeds(e2e: E2E) -> None:
    with e2e.run(ddp_job(f"{TIMEOUT}s")) as run:
        run.wait_line("step 30 of the worker", step_of(WORKER, 30), timeout=240)
        env = {e["name"]: e.get("value") for e in run.pods[WORKER]["spec"]["containers"][0]["env"]}
        assert env.get("PYTHONFAULTHANDLER") == "1", env
        first_uid = run.pods[WORKER]["metadata"]["uid"]
        frozen = time.monotonic()
        signal_container(run.pods[WORKER], signal.SIGSTOP)

        (hung,) = poll("a JobHung Event", lambda: job_events(e2e.api, "JobHung", run), DETECTED_BOUND, run)
        detected = time.monotonic() - frozen
        message = hung["message"]
        assert f"pod {WORKER}" in message and "rank 1" in message and "state T" in message, message
        assert f"kubectl describe configmap {JOB}-hang-1" in message, message

        stacks = client.CoreV1Api(e2e.api).read_namespaced_config_map(f"{JOB}-hang-1", "default").data
        assert set(stacks) == {MASTER, WORKER}, stacks.keys()
        for pod, text in stacks.items():
            assert "Fatal Python error" in text and "train.py" in text, f"{pod}:\n{text[:2000]}"
        assert "state T" in stacks[WORKER]

        run.wait_for("the worker replaced", lambda: (run.uids(WORKER)[-1] != first_uid) or None, 120)
        trains_again = run.wait_line("the new worker training", step_of(WORKER, 0, not_uid=first_uid),
                                     timeout=150, since=frozen)
        finished = run.wait_succeeded(timeout=300)
        print(f"\n[e2e] frozen -> JobHung {detected:.1f}s; frozen -> training again {trains_again.at - frozen:.1f}s")
        assert condition(finished, "Succeeded")
        assert finished["status"]["restartCount"] == 1, finished["status"]
        (record,) = finished["status"]["hangs"]
        assert record["pod"] == WORKER and record["rank"] == 1, record


@pytest.mark.timeout(900)
def test_without_the_annotation_a_frozen_rank_is_waited_for_as_before(e2e: E2E) -> None:
    with e2e.run(ddp_job(None)) as run:
        run.wait_line("step 30 of the worker", step_of(WORKER, 30), timeout=240)
        env = {e["name"] for e in run.pods[WORKER]["spec"]["containers"][0]["env"]}
        assert "PYTHONFAULTHANDLER" not in env
        uids = (run.uids(MASTER), run.uids(WORKER))
        signal_container(run.pods[WORKER], signal.SIGSTOP)
        time.sleep(TIMEOUT + 30)  # what would have been a hang, had the job asked
        signal_container(run.pods[WORKER], signal.SIGCONT)

        finished = run.wait_succeeded(timeout=300)
        assert (run.uids(MASTER), run.uids(WORKER)) == uids, "no pod was replaced"
        assert not finished["status"].get("restartCount") and "hangs" not in finished["status"]
        assert not job_events(e2e.api, "JobHung", run)
