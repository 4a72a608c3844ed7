"""``hack/bench_scale.py --quick``: the scale benchmark's smoke run does what it says (every
job Succeeded, the failed pods replaced, the failover acted, every field of the report
there). Speed is the full run's business, not a test's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_quick_run_finishes_every_job_and_reports_every_number(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    plot = tmp_path / "steady.png"
    run = subprocess.run([sys.executable, str(REPO / "hack" / "bench_scale.py"), "--quick", "--dir", str(tmp_path / "cluster"),
                          "--json", str(out), "--plot", str(plot)],
                         capture_output=True, text=True, timeout=900, cwd=REPO)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(out.read_text())

    assert report["jobs"] == 10
    assert report["jobs_succeeded"] == report["jobs"]
    assert report["pods_failed"] > 0  # a share of the jobs' Workers fail once ...
    assert report["pods_replaced"] >= report["pods_failed"]  # ... and the controller replaces each
    assert report["failover"]["acted_s"] is not None  # the standby took over and created the probe's pods
    assert report["failover"]["new_leader"] != report["failover"]["killed"]
    assert [state["jobs"] for state in report["steady"]] == [1, 3, 10]
    for key in ("created_p50_s", "created_p99_s", "running_p50_s", "running_p99_s", "pod_startup_p50_s",
                "pod_startup_p99_s", "controller_cpu_per_job_s",
                "controller_cpu_per_pod_event_ms", "controller_peak_rss_mib", "queue_depth_max",
                "queue_longest_wait_s", "scheduling_pods_per_s", "controller_creates_per_s",
                "plain_client_creates_per_s"):
        assert report[key] is not None, key
    assert report["requests_per_job"]["create"] > 0
    assert set(report["components"]) == {"API server", "scheduler", "control plane", "hollow nodes", "hollow heartbeats"}
    for state in report["steady"]:
        assert {"controller_cpu_share", "controller_writes_per_minute", "cpu_share", "loadavg"} <= set(state)
    assert plot.stat().st_size > 0
    assert "| job created → all its pods Running, p50 / p99 |" in run.stdout
