"""PyTorchJobs written for Kubeflow, applied unchanged with ``trainctl run -f`` as a user would.

The command runs as a subprocess against the e2e cluster (``KUBECONFIG``), so this covers
what a person sees: the exit code, the summary line and the pods' logs through kubectl.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.cluster import E2E
from tests.support.net import with_free_port
from tests.support.repo import REPO
from tests.support.samples import load_sample

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("sample, name, pods", [
    ("kubeflow/pytorch-mnist-gloo.yaml", "pytorch-dist-mnist-gloo", ["master-0", "worker-0"]),
    ("kubeflow/pytorch-elastic-mnist.yaml", "elastic-example-mnist", ["worker-0", "worker-1"]),
])
def test_a_kubeflow_sample_runs_unchanged_with_trainctl_run(e2e: E2E, sample: str, name: str, pods: list[str],
                                                           tmp_path: Path) -> None:
    env = dict(e2e.kubectl.env)  # KUBECONFIG and a HOME of the cluster's own, as kubectl gets them
    # Unchanged but for the port: in the shared network mode the machine's other clusters may hold 23456.
    manifest = tmp_path / Path(sample).name
    manifest.write_text(yaml.safe_dump(with_free_port(load_sample(sample))))
    done = subprocess.run(
        [sys.executable, "-m", "trainctl.cli.main", "run", "-f", str(manifest), "--timeout", "240s"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert f"PyTorchJob default/{name} succeeded after" in out
    assert f"{name}-{pods[0]} | [done] epochs=1" in out, "the first pod's log is shown as it trains"

    ranks = set()
    for pod in pods:
        log = e2e.kubectl("logs", f"{name}-{pod}")
        start = next(line for line in log.splitlines() if line.startswith("[start]"))
        fields = dict(part.split("=", 1) for part in start.split()[1:])
        assert fields["WORLD_SIZE"] == "2", log
        ranks.add(fields["RANK"])
        steps = [line for line in log.splitlines() if line.startswith("[step]")]
        assert steps and "[done] epochs=1 " in log, log
    assert ranks == {"0", "1"}
