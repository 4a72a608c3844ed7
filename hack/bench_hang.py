"""How fast a frozen rank is found, named and training again (docs/benchmarks.md, docs/hangs.md).

Each run applies the DDP sample (Master + 1 Worker, every step busy on the CPU) with
``trainctl.io/hang-timeout``, waits for step 30, freezes the Worker's processes (SIGSTOP, its
node healthy) and times, from the freeze:

- the ``JobHung`` Event (goal: the timeout plus at most 30 s);
- whether it names the frozen pod (the culprit);
- the replacement Worker's first training step (training again).

All runs share one embedded cluster; each run is a fresh job. The table shows the median
(min-max) of the times and the culprit named in k of n runs.

Usage: ``python hack/bench_hang.py [--runs 5] [--timeout 20]``
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests.support, when run as `python hack/bench_hang.py`

from tests.support.cluster import E2E, scratch_cluster  # noqa: E402
from tests.support.hang import WORKER, ddp_job, job_events, poll, signal_container, step_of  # noqa: E402


def one_run(bench: E2E, timeout: int) -> tuple[float, bool, float]:
    """(freeze → JobHung, culprit named, freeze → the new Worker's first step), in seconds."""
    with bench.run(ddp_job(f"{timeout}s")) as run:
        run.wait_line("step 30 of the worker", step_of(WORKER, 30), timeout=300)
        first_uid = run.pods[WORKER]["metadata"]["uid"]
        frozen = time.monotonic()
        signal_container(run.pods[WORKER], signal.SIGSTOP)
        (hung,) = poll("a JobHung Event", lambda: job_events(bench.api, "JobHung", run), timeout + 300, run)
        detected = time.monotonic() - frozen
        named = f"pod {WORKER} " in hung["message"]
        again = run.wait_line("the new worker training", step_of(WORKER, 0, not_uid=first_uid), 300, since=frozen)
        run.wait_finished(timeout=300)
    bench.clean()
    return detected, named, again.at - frozen


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} s ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=int, default=20, help="the job's hang timeout, in seconds")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-hang-") as root, scratch_cluster(Path(root)) as bench:
        for index in range(args.runs):
            detected, named, again = one_run(bench, args.timeout)
            print(f"run {index + 1}: JobHung after {detected:.1f} s, culprit named: {named}, training again after {again:.1f} s",
                  flush=True)
            results.append((detected, named, again))
    print(f"\n| hang timeout | freeze → JobHung | culprit named | freeze → training again |\n|---|---|---|---|\n"
          f"| {args.timeout} s | {spread([r[0] for r in results])} | {sum(r[1] for r in results)} of {len(results)} "
          f"| {spread([r[2] for r in results])} |")


if __name__ == "__main__":
    main()
