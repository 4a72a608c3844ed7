"""``meta.k8s.io/v1`` Tables: what ``kubectl get`` prints.

kubectl prints cells verbatim, so the server renders everything, ages included. Pods,
services, nodes and namespaces get the columns kubectl users know; custom resources get
their CRD's ``additionalPrinterColumns``; anything else gets NAME and AGE.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import orjson

from . import jsonpath
from .registry import ResourceType

Obj = dict[str, Any]
Column = dict[str, Any]


def human_duration(seconds: float) -> str:
    """Kubernetes' ``duration.HumanDuration``."""
    if seconds < -1:
        return "<invalid>"
    s = max(int(seconds), 0)
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if days < 365 * 8:
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{years}y"


def age(timestamp: str | None, now: datetime) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return human_duration((now - then).total_seconds())


def _col(name: str, description: str = "", priority: int = 0, type_: str = "string", format_: str = "") -> Column:
    return {"name": name, "type": type_, "format": format_, "description": description, "priority": priority}


_NAME = _col("Name", "Name must be unique within a namespace.", format_="name")
_AGE = _col("Age", "CreationTimestamp is a timestamp representing the server time when this object was created.")


def _pod_status(pod: Obj) -> tuple[str, int, int, int]:
    """(STATUS, ready, total, restarts) like kubectl's pod printer."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    total = len(spec.get("containers") or [])
    reason = status.get("reason") or status.get("phase") or "Pending"
    restarts = 0
    init_statuses = status.get("initContainerStatuses") or []
    initializing = False
    for i, cs in enumerate(init_statuses):
        restarts += cs.get("restartCount", 0)
        state = cs.get("state") or {}
        if state.get("terminated", {}).get("exitCode", 1) == 0 and "terminated" in state:
            continue
        initializing = True
        if "terminated" in state:
            term = state["terminated"]
            reason = f"Init:{term.get('reason') or 'ExitCode:' + str(term.get('exitCode', 0))}"
        elif state.get("waiting", {}).get("reason") not in (None, "", "PodInitializing"):
            reason = f"Init:{state['waiting']['reason']}"
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        break
    ready = 0
    if not initializing:
        restarts = 0
        for cs in status.get("containerStatuses") or []:
            restarts += cs.get("restartCount", 0)
            state = cs.get("state") or {}
            if state.get("waiting", {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif "terminated" in state:
                term = state["terminated"]
                reason = term.get("reason") or (f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}")
            elif "running" in state and cs.get("ready"):
                ready += 1
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return reason, ready, total, restarts


def _pod_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [
        _NAME,
        _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
        _col("Status", "The aggregate status of the containers in this pod."),
        _col("Restarts", "The number of times the containers in this pod have been restarted.", type_="string"),
        _AGE,
        _col("IP", "IP address allocated to the pod.", priority=1),
        _col("Node", "Name of the Node this pod is assigned to.", priority=1),
        _col("Nominated Node", "Name of the node nominated for this pod.", priority=1),
        _col("Readiness Gates", "Pod Readiness Gates.", priority=1),
    ]

    def cells(pod: Obj, now: datetime) -> list[Any]:
        reason, ready, total, restarts = _pod_status(pod)
        status = pod.get("status") or {}
        gates = (pod.get("spec") or {}).get("readinessGates") or []
        return [
            pod["metadata"]["name"], f"{ready}/{total}", reason, restarts,
            age(pod["metadata"].get("creationTimestamp"), now),
            status.get("podIP") or "<none>", (pod.get("spec") or {}).get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", f"{len(gates)}" if gates else "<none>",
        ]

    return columns, cells


def _service_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), _AGE,
               _col("Selector", priority=1)]

    def cells(svc: Obj, now: datetime) -> list[Any]:
        spec = svc.get("spec") or {}
        ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
        selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
        return [svc["metadata"]["name"], spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>",
                "<none>", ports, age(svc["metadata"].get("creationTimestamp"), now), selector]

    return columns, cells


def _node_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Status"), _col("Roles"), _AGE, _col("Version")]

    def cells(node: Obj, now: datetime) -> list[Any]:
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = next((c for c in conditions if c.get("type") == "Ready"), None)
        state = "Ready" if ready and ready.get("status") == "True" else "NotReady"
        roles = sorted(k.split("/", 1)[1] for k in (node["metadata"].get("labels") or {})
                       if k.startswith("node-role.kubernetes.io/"))
        version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
        return [node["metadata"]["name"], state, ",".join(roles) or "<none>",
                age(node["metadata"].get("creationTimestamp"), now), version]

    return columns, cells


def _namespace_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    def cells(ns: Obj, now: datetime) -> list[Any]:
        return [ns["metadata"]["name"], (ns.get("status") or {}).get("phase", "Active"),
                age(ns["metadata"].get("creationTimestamp"), now)]

    return [_NAME, _col("Status"), _AGE], cells


def _event_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message"),
               _col("Source", priority=1), _col("First Seen", priority=1), _col("Count", priority=1),
               _col("Name", priority=1, format_="name")]

    def cells(event: Obj, now: datetime) -> list[Any]:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        last = (event.get("lastTimestamp") or (event.get("series") or {}).get("lastObservedTime")
                or event.get("eventTime") or event["metadata"].get("creationTimestamp"))
        first = event.get("firstTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
        source = (event.get("source") or {}).get("component") or event.get("reportingController") or ""
        return [age(last, now), event.get("type", ""), event.get("reason", ""),
                f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
                event.get("message") or event.get("note") or "", source, age(first, now),
                event.get("count") or 1, event["metadata"]["name"]]

    return columns, cells


def _default_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    def cells(obj: Obj, now: datetime) -> list[Any]:
        return [obj["metadata"]["name"], age(obj["metadata"].get("creationTimestamp"), now)]

    return [_NAME, _AGE], cells


def _cell(value: Any, column: Obj, now: datetime) -> Any:
    if value is None:
        return None
    if column.get("type") == "date" and isinstance(value, str):
        return age(value, now)
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return value


def _custom_columns(rtype: ResourceType) -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    printer = rtype.printer_columns
    if not printer:
        return _default_columns()
    columns = [_NAME] + [
        _col(c["name"], c.get("description", ""), c.get("priority", 0),
             "string" if c.get("type") == "date" else c.get("type", "string"), c.get("format", ""))
        for c in printer
    ]

    def cells(obj: Obj, now: datetime) -> list[Any]:
        row: list[Any] = [obj["metadata"]["name"]]
        for column in printer:
            found = jsonpath.find(obj, column.get("jsonPath", ""))
            row.append(_cell(found[0] if found else None, column, now))
        return row

    return columns, cells


_BUILTIN = {
    ("", "pods"): _pod_columns,
    ("", "services"): _service_columns,
    ("", "nodes"): _node_columns,
    ("", "namespaces"): _namespace_columns,
    ("", "events"): _event_columns,
    ("events.k8s.io", "events"): _event_columns,
}


def table(rtype: ResourceType, objects: list[Obj], include: str, list_meta: Obj | None = None) -> Obj:
    """A Table of ``objects``; ``include`` is the includeObject policy (None, Metadata, Object)."""
    columns, cells = (_custom_columns(rtype) if rtype.is_custom
                      else _BUILTIN.get((rtype.group, rtype.plural), _default_columns)())
    now = datetime.now(timezone.utc)
    rows = []
    for obj in objects:
        row: Obj = {"cells": cells(obj, now)}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta or {},
            "columnDefinitions": columns, "rows": rows}
