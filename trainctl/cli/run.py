"""``trainctl run -f FILE``: launch training jobs, watch them run, exit with how they ended.

The README's main command. It applies the job(s) to the cluster in KUBECONFIG (or
~/.kube/config) or, when none is configured, to a throwaway embedded cluster it starts and
removes itself; shows progress and the lead pod's log while the job runs; and exits 0 only
when every job Succeeded. The launch-and-wait logic is ``trainctl.launch``'s, shared
with the Kubeflow Pipelines components.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainctl.api.durations import positive_duration
from trainctl.cli.timeline import timeline_file
from trainctl.cli.validate import add_validate_flag

# The directory, under TMPDIR, where a throwaway cluster's pod logs are kept after it is gone.
LOGS_PREFIX = "trainctl-run-logs-"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run training jobs and wait for them (on KUBECONFIG's cluster, or a throwaway local one)",
        description=(
            "Create the PyTorchJob/MSJob(s) in FILE, show their progress and the master's (or worker 0's) "
            "log, and exit 0 when every job Succeeded, 1 otherwise. Without KUBECONFIG or ~/.kube/config, "
            "a throwaway local cluster is started for the run."
        ),
    )
    parser.add_argument("-f", "--filename", required=True, metavar="FILE", help="job manifest (YAML or JSON, multi-document; - for stdin)")
    parser.add_argument("-n", "--namespace", help="namespace for the jobs (default: the manifest's, else the kubeconfig context's)")
    parser.add_argument("--timeout", type=positive_duration, metavar="DURATION", help="give up after this long (e.g. 90s, 10m, 2h); the job is left running unless Ctrl-C")
    parser.add_argument("--replace", action="store_true", help="delete an existing job of the same name first")
    parser.add_argument("--keep", action="store_true", help="on Ctrl-C (or SIGTERM), leave the job running instead of deleting it")
    parser.add_argument(
        "--timeline", type=timeline_file, metavar="FILE",
        help="at the end, draw each job's pods, restarts, conditions and world size over time to FILE (.svg, .png, .pdf or .html)",
    )
    add_validate_flag(parser)
    parser.set_defaults(func=run)


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from trainctl.cli.validate import read_or_report
    from trainctl.launch.manifests import ManifestInvalid, read_jobs

    text = read_or_report(args.filename, sys.stderr)
    if text is None:
        return 1
    try:
        manifest = read_jobs(text, args.filename, args.field_validation)
    except ManifestInvalid as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    for warning in manifest.warnings:
        print(warning, file=sys.stderr)
    jobs = manifest.jobs

    from trainctl.launch import ClusterConfigError, LaunchError, make_view, sigterm_as_interrupt

    view = make_view()
    try:
        with sigterm_as_interrupt(), _cluster(view) as (api, namespace, cluster):
            return _run_jobs(args, api, namespace, jobs, view, cluster)
    except (LaunchError, ClusterConfigError) as exc:
        view.close()
        _error(str(exc))
        return 1
    except KeyboardInterrupt:
        view.close()
        _error("interrupted")
        return 130


@contextlib.contextmanager
def _cluster(view: Any) -> Iterator[tuple[Any, str, Any]]:
    """(api client, default namespace, the throwaway cluster or None)."""
    from trainctl.launch import ClusterConfigError, NoClusterConfigured, connect, default_namespace

    try:
        api = connect()
    except NoClusterConfigured:
        api = None
    if api is not None:
        yield api, default_namespace(), None
        return
    from trainctl.cluster.local_cluster import ClusterError, LocalCluster

    view.note("no cluster configured (no KUBECONFIG, no ~/.kube/config): starting a throwaway local cluster")
    with tempfile.TemporaryDirectory(prefix="trainctl-run-") as workdir:
        cluster = LocalCluster(workdir, controller=True, die_with_supervisor=True)  # throwaway: never outlives us
        try:
            cluster.start(on_step=view.note)
        except ClusterError as exc:
            raise ClusterConfigError(f"cannot start a throwaway local cluster: {exc}") from None
        try:
            kubeconfig = str(cluster.kubeconfig)
            yield connect(kubeconfig), default_namespace(kubeconfig), cluster
        finally:
            cluster.stop()


def _run_jobs(args: argparse.Namespace, api: Any, default_ns: str, jobs: list[dict[str, Any]], view: Any, cluster: Any) -> int:
    from trainctl.launch import JobExists, Launcher, Outcome
    from trainctl.launch.job_kinds import kind_of
    from trainctl.launch.summary import summary_lines

    launcher = Launcher(api)
    started = time.monotonic()
    deadline = None if args.timeout is None else started + args.timeout
    created: list[dict[str, Any]] = []
    try:
        for job in jobs:
            namespace = args.namespace or (job.get("metadata") or {}).get("namespace") or default_ns
            try:
                obj = launcher.create(job, namespace, replace=args.replace, deadline=deadline)
            except JobExists as exc:
                raise JobExists(f"{exc}; pass --replace to delete and recreate it") from None
            created.append(obj)
            view.note(f"created {obj['kind']} {namespace}/{obj['metadata']['name']}")
    except BaseException as exc:
        # All or nothing: do not leave half of a multi-job file running (Ctrl-C with --keep excepted).
        if not (isinstance(exc, KeyboardInterrupt) and args.keep):
            for obj in created:
                launcher.delete(kind_of(obj), obj["metadata"]["namespace"], obj["metadata"]["name"])
                view.note(f"deleted {obj['kind']} {obj['metadata']['namespace']}/{obj['metadata']['name']}")
        raise

    results = []
    timelines = []
    for index, obj in enumerate(created):
        recorder = _recorder(obj) if args.timeline else None
        result = launcher.follow(obj, view, deadline=deadline, started=started, delete_on_interrupt=not args.keep, observer=recorder)
        results.append(result)
        if recorder is not None:
            timelines.append(_write_timeline(launcher, recorder, obj, _timeline_path(args.timeline, obj, len(created))))
        if result.outcome is Outcome.INTERRUPTED:
            for rest in created[index + 1 :]:
                if not args.keep:
                    launcher.delete(kind_of(rest), rest["metadata"]["namespace"], rest["metadata"]["name"])
            break
    view.close()

    saved_logs = _save_logs(launcher, results) if cluster is not None else None
    for result in results:
        hints = None
        if saved_logs is not None:
            hints = [str(path) for path in saved_logs.get((result.namespace, result.name), [])]
        for line in summary_lines(result, hints):
            print(line)
        if result.outcome is Outcome.INTERRUPTED:
            print("  (the job was kept: --keep)" if args.keep else "  (Ctrl-C: the job and its pods were deleted; --keep leaves them)")
    for line in timelines:
        print(line)
    if saved_logs is not None:
        print("the throwaway cluster is removed; the pods' logs were saved above")
    if any(r.outcome is Outcome.INTERRUPTED for r in results):
        return 130
    return 0 if results and all(r.succeeded for r in results) else 1


def _recorder(job: dict[str, Any]) -> Any:
    from trainctl.launch.job_kinds import kind_of
    from trainctl.timeline.live_recorder import TimelineRecorder

    return TimelineRecorder(container=kind_of(job).container)


def _timeline_path(template: str, job: dict[str, Any], jobs: int) -> Path:
    """``template`` itself for one job; ``NAME-JOB.EXT`` per job when the file holds several."""
    path = Path(template)
    return path if jobs == 1 else path.with_name(f"{path.stem}-{job['metadata']['name']}{path.suffix}")


def _write_timeline(launcher: Any, recorder: Any, job: dict[str, Any], path: Path) -> str:
    """Draw what the recorder saw, with the job's Events added; the line to print about it."""
    from trainctl.kube.client import ApiError
    from trainctl.timeline import drawing, fetch

    try:
        pods = fetch.owned_pods(launcher.client, job)
    except ApiError:
        pods = []  # what the watches saw still makes a timeline
    timeline = recorder.timeline(events=fetch.job_events(launcher.client, job), pods=pods)
    try:
        drawing.write(timeline, path)
    except OSError as exc:
        return f"timeline: cannot write {path}: {exc.strerror or exc}"
    return f"timeline: {path} ({len(timeline.rows)} pod row(s))"


def _save_logs(launcher: Any, results: list[Any]) -> dict[tuple[str, str], list[Path]]:
    """Copy every pod's log out of a throwaway cluster before it disappears.

    They are kept on purpose, in a directory of their own under TMPDIR (the summary names
    each file), made only when there is a log to keep.
    """
    from trainctl.kube.client import ApiError

    directory: Path | None = None
    saved: dict[tuple[str, str], list[Path]] = {}
    for result in results:
        for pod in result.pods:
            try:
                stream = launcher.client.log(result.namespace, pod)
                try:
                    lines = list(stream)
                finally:
                    stream.close()
            except ApiError:
                continue
            directory = directory or Path(tempfile.mkdtemp(prefix=LOGS_PREFIX))
            path = directory / f"{pod}.log"
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            saved.setdefault((result.namespace, result.name), []).append(path)
    return saved
