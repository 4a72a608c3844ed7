"""``trainctl timeline JOB``: draw what happened to a training job, one row per pod, on one time axis.

It reads the job, its pods, their Events and the pods' logs from the cluster in
KUBECONFIG (or ~/.kube/config) and writes an SVG, a PNG, a PDF or an HTML page, as the
file's extension says. A job that is still running is drawn up to now. ``trainctl run --timeline FILE`` writes the same picture
from what it watched live, which also holds what the API no longer shows.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used, to keep the CLI quick to start
    from trainctl.api.kinds import JobKind
    from trainctl.kube.client import KubeClient

from trainctl.api import kinds as job_kinds


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "timeline",
        help="draw a job's pods, restarts, conditions and world size over time (SVG, PNG, PDF or HTML)",
        description=(
            "Write a picture of JOB: a row per pod with its phases, restarts (with reasons) and node, "
            "the job's conditions, and the WORLD_SIZE its pods' logs report, on one time axis."
        ),
    )
    names = " or ".join(k.kind for k in job_kinds.KINDS)
    parser.add_argument("job", metavar="JOB", help=f"the {names} name")
    parser.add_argument("-n", "--namespace", help="the job's namespace (default: the kubeconfig context's)")
    parser.add_argument(
        "-o", "--output", type=timeline_file, metavar="FILE", help="FILE.svg, .png, .pdf or .html (default: JOB-timeline.svg)"
    )
    parser.add_argument(
        "--kind", choices=sorted(k.singular for k in job_kinds.KINDS), help="the job's kind when jobs of several kinds have this name"
    )
    parser.set_defaults(func=run)


def timeline_file(value: str) -> str:
    """An argparse type: a file name whose extension names a format a timeline is written in."""
    from trainctl.timeline.drawing import UnknownFormat, format_of

    try:
        format_of(value)
    except UnknownFormat as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def run(args: argparse.Namespace) -> int:
    from trainctl.kube.client import ApiError, KubeClient
    from trainctl.launch import ClusterConfigError, connect, default_namespace, launcher
    from trainctl.timeline import drawing, fetch

    try:
        api = connect()
    except ClusterConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    namespace = args.namespace or default_namespace()
    client = KubeClient.for_api_client(api, qps=0, max_attempts=launcher.MAX_ATTEMPTS)
    kinds = [k for k in job_kinds.KINDS if args.kind is None or k.singular == args.kind]
    try:
        found = [(kind, job) for kind in kinds if (job := _get(client, kind, namespace, args.job)) is not None]
        if not found:
            what = " or ".join(k.kind for k in kinds)
            print(f"error: no {what} {namespace}/{args.job}", file=sys.stderr)
            return 1
        if len(found) > 1:
            both = " and ".join(kind.kind for kind, _ in found)
            print(f"error: jobs of several kinds ({both}) are named {namespace}/{args.job}: pass --kind", file=sys.stderr)
            return 1
        kind, job = found[0]
        timeline = fetch.timeline(client, kind, job, now=time.time())
    except ApiError as exc:
        print(f"error: cannot read {namespace}/{args.job}: {exc.message or exc.reason}", file=sys.stderr)
        return 1
    finally:
        client.close()
    path = drawing.write(timeline, args.output or f"{args.job}-timeline.svg")
    print(f"wrote {path}: {len(timeline.rows)} pod row(s), {len(timeline.conditions)} condition change(s), {len(timeline.world_size)} world size change(s)")
    return 0


def _get(client: KubeClient, kind: JobKind, namespace: str, name: str) -> dict[str, Any] | None:
    from trainctl.kube.client import ApiError
    from trainctl.kube.restmapper import job_resource

    try:
        return client.get_or_none(job_resource(kind), namespace, name)
    except ApiError as exc:
        if exc.code == 404:  # the kind's CRD is not installed
            return None
        raise
