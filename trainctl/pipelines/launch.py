"""The pipeline step's entry point: ``python -m trainctl.pipelines.launch --kind PyTorchJob …``.

The components in ``trainctl.pipelines.components`` run this module in the trainctl
image. It builds (or reads) the job, launches it with ``trainctl.launch`` — the code
``trainctl run`` uses —, writes the step's outputs (final condition, job status as JSON)
and exits non-zero with the job's failure message when the job did not succeed, which is
what fails the step. Progress and the lead pod's log go to stdout, the step's log.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from trainctl.api import kinds

_TRUE = {"1", "t", "true"}
_FALSE = {"0", "f", "false", ""}


def parse_bool(text: str) -> bool:
    """Booleans as KFP renders them (``true``/``false``) and as Go parses them (``True``, ``1`` …)."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def parse_int(text: str) -> int:
    """An integer, also when KFP renders it as a JSON number (``2.0``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    return int(value)


def parse_list(text: str) -> list[str]:
    """A JSON list of strings (how KFP passes a ``list`` parameter); empty means none."""
    if not text.strip():
        return []
    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a JSON list: {text!r}") from None
    if not isinstance(value, list):
        raise argparse.ArgumentTypeError(f"not a JSON list: {text!r}")
    return [v if isinstance(v, str) else json.dumps(v) for v in value]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainctl.pipelines.launch", description=__doc__.splitlines()[0])
    parser.add_argument("--kind", required=True, choices=[k.kind for k in kinds.KINDS])
    parser.add_argument("--name", default="", help="job name (default: generated)")
    parser.add_argument("--namespace", default="", help="namespace (default: the step's own)")
    parser.add_argument("--manifest", default="", help="the whole job as YAML or JSON; the parameters below are then ignored")
    parser.add_argument("--image", default="")
    parser.add_argument("--command", type=parse_list, default=[])
    parser.add_argument("--args", type=parse_list, default=[])
    parser.add_argument("--replicas", type=parse_int, default=1)
    parser.add_argument("--min-replicas", type=parse_int, default=0)
    parser.add_argument("--max-replicas", type=parse_int, default=0)
    parser.add_argument("--nproc-per-node", default="")
    parser.add_argument("--cpu", default="")
    parser.add_argument("--memory", default="")
    parser.add_argument("--gpus", type=parse_int, default=0)
    parser.add_argument("--npus", type=parse_int, default=0)
    parser.add_argument("--port", type=parse_int, default=0, help="the framework container's port (0: the kind's default)")
    parser.add_argument("--timeout-seconds", type=float, default=0.0, help="0 waits for as long as the job runs")
    parser.add_argument("--delete-when-done", type=parse_bool, default=True)
    parser.add_argument("--condition-path", type=Path, help="output: the final condition (Succeeded, Failed, TimedOut …)")
    parser.add_argument("--status-path", type=Path, help="output: the job's status as JSON")
    return parser


def job_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The job to launch; ``ManifestInvalid`` (one line per problem) when it is not usable."""
    from trainctl.launch.manifests import ManifestInvalid, read_jobs
    from trainctl.pipelines.jobspec import JobParameters, NoLayout, build

    if args.manifest.strip():
        jobs = read_jobs(args.manifest, "manifest", "Warn").jobs  # as the API server, called without fieldValidation
        if len(jobs) != 1:
            raise ManifestInvalid([f"manifest: expected one job, found {len(jobs)}"])
        job = jobs[0]
        if job.get("kind") != args.kind:
            raise ManifestInvalid([f"manifest: kind is {job.get('kind')}, but this component launches {args.kind}"])
        if args.name:
            job.setdefault("metadata", {})["name"] = args.name
        return job
    # Every job parameter has the flag of the same name (build_parser).
    params = JobParameters(**{f.name: getattr(args, f.name) for f in dataclasses.fields(JobParameters)})
    problems = params.problems()
    if problems:
        raise ManifestInvalid(problems)
    try:
        job = build(kinds.BY_KIND[args.kind], args.name, params)
    except NoLayout as exc:
        raise ManifestInvalid([f"manifest: required: {exc}"]) from None
    from trainctl.api.validation import validate

    errors = validate(job)
    if errors:
        raise ManifestInvalid([str(error) for error in errors])
    return job


def write_outputs(args: argparse.Namespace, condition: str, status: dict[str, Any]) -> None:
    for path, text in ((args.condition_path, condition), (args.status_path, json.dumps(status, sort_keys=True))):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from trainctl.launch import (
        ClusterConfigError,
        LaunchError,
        PlainView,
        connect,
        default_namespace,
        launch,
        sigterm_as_interrupt,
    )
    from trainctl.launch.manifests import ManifestInvalid
    from trainctl.launch.summary import summary_lines

    try:
        job = job_from_args(args)
    except ManifestInvalid as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    try:
        api = connect()
        namespace = args.namespace or (job.get("metadata") or {}).get("namespace") or default_namespace()
        # A cancelled run stops the step with SIGTERM: delete the job rather than orphan it.
        with sigterm_as_interrupt():
            result = launch(
                api,
                job,
                namespace,
                PlainView(sys.stdout),
                timeout=args.timeout_seconds or None,
                delete_when_done=args.delete_when_done,
                delete_on_interrupt=True,
            )
    except (LaunchError, ClusterConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    write_outputs(args, result.outcome.value, result.status)
    print("\n".join(summary_lines(result)), flush=True)
    if not result.succeeded:
        print(f"error: {result.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
