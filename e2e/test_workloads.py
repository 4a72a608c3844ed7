"""batch/v1 Jobs on the embedded cluster, as a user runs a data-preparation step before training."""

from __future__ import annotations

import sys

from tests.support.cluster import E2E


def test_kubectl_create_job_runs_to_completion_and_its_logs_are_served(e2e: E2E) -> None:
    kubectl = e2e.kubectl
    try:
        kubectl("create", "job", "prep", "--image=python:3.11", "--", sys.executable, "-c", "print('prepared', 6 * 7)")
        kubectl("wait", "--for=condition=complete", "job/prep", "--timeout=120s", timeout=150)
        assert "prepared 42" in kubectl("logs", "job/prep")
        row = kubectl("get", "job", "prep").splitlines()[1].split()
        assert row[:3] == ["prep", "Complete", "1/1"]
    finally:
        kubectl("delete", "job", "prep", "--ignore-not-found", "--wait=true", "--timeout=60s", timeout=90)


def test_an_indexed_job_that_fails_past_its_backoff_limit_fails(e2e: E2E) -> None:
    kubectl = e2e.kubectl
    script = "import os, sys; print('index', os.environ['JOB_COMPLETION_INDEX']); sys.exit(int(os.environ['JOB_COMPLETION_INDEX']))"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "shards"},
           "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 0,
                    "template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "shard", "image": "python:3.11", "command": [sys.executable, "-c", script]}]}}}}
    try:
        kubectl.apply(job)
        kubectl("wait", "--for=condition=failed", "job/shards", "--timeout=120s", timeout=150)
        reason = kubectl("get", "job", "shards", "-o", "jsonpath={.status.conditions[?(@.type=='Failed')].reason}")
        assert reason == "BackoffLimitExceeded"
        # Index 1 is the one that failed; its pod knew its index from the downward API.
        assert "index 1" in kubectl("logs", "-l", "batch.kubernetes.io/job-completion-index=1,batch.kubernetes.io/job-name=shards")
    finally:
        kubectl("delete", "job", "shards", "--ignore-not-found", "--wait=true", "--timeout=60s", timeout=90)
