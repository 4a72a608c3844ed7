"""``trainctl render -f FILE``: the objects the controller would create for a job, offline.

Runs the reconcile core against an empty cluster until it has nothing more to create and
prints every pod, Service, HPA and PodGroup as multi-document YAML, so a person can see the
environment, labels and init containers their pods will get before submitting. Values only
a live cluster knows are placeholders: the job's uid is ``<job-uid>``, a ``generateName``
gets ``xxxxx`` as its random suffix, and the MSJob Scheduler Service's ClusterIP is
``192.0.2.10`` (a documentation address, RFC 5737), shown so the MSJob pods appear as they
will once that Service exists. A Volcano PodGroup is taken as admitted. Bad input gives
exactly ``trainctl validate``'s errors, one per line, exit 1.
"""

from __future__ import annotations

import copy
import io
import sys
from datetime import datetime
from typing import Any

import yaml

from trainctl.cli import validate as validate_command
from trainctl.controller.reconcile import Observed, ReconcileConfig, reconcile

PLACEHOLDER_UID = "<job-uid>"
PLACEHOLDER_CLUSTER_IP = "192.0.2.10"
# The API server appends five random characters to metadata.generateName.
PLACEHOLDER_NAME_SUFFIX = "xxxxx"
# A fixed instant: the output must not depend on when it was rendered.
_EPOCH = "2000-01-01T00:00:00Z"
_KIND_ORDER = {"Pod": 0, "Service": 1, "HorizontalPodAutoscaler": 2, "PodGroup": 3}
# The core needs at most: PodGroup/Scheduler Service, then pods; one more to prove it is done.
_MAX_ROUNDS = 4


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "render",
        help="print the pods, Services, HPA and PodGroup a job would get, without a cluster",
        description=(
            "Print, as multi-document YAML, the objects the controller would create for each PyTorchJob "
            "and MSJob in FILE on a fresh cluster: pods (with their environment), Services, the HPA and "
            f"the PodGroup. Placeholders: the job uid is {PLACEHOLDER_UID}; a generateName ends in "
            f"{PLACEHOLDER_NAME_SUFFIX}; the MSJob Scheduler Service "
            f"ClusterIP is {PLACEHOLDER_CLUSTER_IP}. Invalid input prints the same errors as "
            "'trainctl validate' and exits 1."
        ),
    )
    parser.add_argument(
        "-f", "--filename", action="append", required=True, metavar="FILE", help="manifest to render; - for stdin; repeatable"
    )
    parser.add_argument(
        "--gang-scheduler",
        metavar="NAME",
        default=None,
        help="render as with gang scheduling: 'volcano', or a scheduler-plugins scheduler name",
    )
    validate_command.add_validate_flag(parser)
    parser.set_defaults(func=run)


def run(args: Any) -> int:
    config = ReconcileConfig(gang_scheduler=args.gang_scheduler)
    jobs: list[dict[str, Any]] = []
    ok = True
    for filename in args.filename:
        text = validate_command.read_or_report(filename, sys.stderr)
        # The exact checks and messages of ``trainctl validate``; its "is valid" lines are dropped.
        valid = None if text is None else validate_command.validate_text(text, filename, io.StringIO(), sys.stderr, args.field_validation)
        if valid is None:
            ok = False
            continue
        jobs += valid
    if not ok:
        return 1
    objects = [obj for job in jobs for obj in render_job(job, config)]
    yaml.dump_all(objects, sys.stdout, Dumper=_Dumper, sort_keys=False, default_flow_style=False, explicit_start=True)
    return 0


def render_job(job: dict[str, Any], config: ReconcileConfig = ReconcileConfig()) -> list[dict[str, Any]]:
    """Every object the controller creates for ``job`` on an empty cluster, pods first."""
    job = copy.deepcopy(job)
    meta = job.setdefault("metadata", {})
    meta.setdefault("namespace", "default")
    meta.setdefault("uid", PLACEHOLDER_UID)
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + PLACEHOLDER_NAME_SUFFIX
    job.pop("status", None)
    now = datetime.fromisoformat(_EPOCH.replace("Z", "+00:00"))
    observed = Observed()
    created: list[dict[str, Any]] = []
    for _ in range(_MAX_ROUNDS):
        plan = reconcile(job, observed, now, config)
        if not plan.creates:
            break
        for obj in plan.creates:
            created.append(obj)
            _pretend_created(obj, observed)
        if plan.status is not None:
            job["status"] = plan.status
    return sorted(created, key=lambda obj: _KIND_ORDER.get(obj["kind"], len(_KIND_ORDER)))


def _pretend_created(obj: dict[str, Any], observed: Observed) -> None:
    """Add an object to the simulated cluster as the API server (and Volcano) would hold it."""
    kind = obj["kind"]
    if kind == "Pod":
        observed.pods.append(obj)
    elif kind == "Service":
        service = copy.deepcopy(obj)
        if service["spec"].get("clusterIP") is None:
            service["spec"]["clusterIP"] = PLACEHOLDER_CLUSTER_IP
        observed.services.append(service)
    elif kind == "HorizontalPodAutoscaler":
        observed.hpa = obj
    elif kind == "PodGroup":
        observed.pod_group = {**obj, "status": {"phase": "Inqueue"}}


class _Dumper(yaml.SafeDumper):
    """Plans share sub-structures between pods; print each in full, never as &anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
