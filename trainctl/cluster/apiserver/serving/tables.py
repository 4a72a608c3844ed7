"""``meta.k8s.io/v1`` Tables: what ``kubectl get`` prints.

kubectl prints cells verbatim, so the server renders everything, ages included. Pods,
services, nodes, namespaces, events, HorizontalPodAutoscalers, PodDisruptionBudgets and
PriorityClasses get the columns
kube-apiserver's printers give them; custom resources get their CRD's
``additionalPrinterColumns``; anything else gets NAME and AGE.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import orjson

from trainctl.cluster.apiserver.apimachinery import hpa_conversion, jsonpath
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType
from trainctl.cluster.label_selectors import selector_string

Obj = dict[str, Any]
Column = dict[str, Any]

NODE_ROLE_PREFIX = "node-role.kubernetes.io/"


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


def _last_restart(pod: Obj, initializing: bool) -> str | None:
    """When the latest restart ended the run before it: the newest ``lastState.terminated.finishedAt``."""
    status = pod.get("status") or {}
    statuses = status.get("initContainerStatuses" if initializing else "containerStatuses") or []
    ends = [((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt") for cs in statuses]
    return max((end for end in ends if isinstance(end, str) and end), default=None)


def _restarts(pod: Obj, restarts: int, now: datetime) -> str:
    """``5 (20s ago)``, as kubectl prints a pod's RESTARTS."""
    status = pod.get("status") or {}
    initializing = any(not ("terminated" in (cs.get("state") or {}) and cs["state"]["terminated"].get("exitCode") == 0)
                       for cs in status.get("initContainerStatuses") or [])
    last = _last_restart(pod, initializing)
    return f"{restarts} ({age(last, now)} ago)" if restarts and last else str(restarts)


def pod_status(pod: Obj) -> tuple[str, int, int, int]:
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
        reason, ready, total, restarts = pod_status(pod)
        status = pod.get("status") or {}
        gates = (pod.get("spec") or {}).get("readinessGates") or []
        return [
            pod["metadata"]["name"], f"{ready}/{total}", reason, _restarts(pod, restarts, now),
            age(pod["metadata"].get("creationTimestamp"), now),
            status.get("podIP") or "<none>", (pod.get("spec") or {}).get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", f"{len(gates)}" if gates else "<none>",
        ]

    return columns, cells


def _external_ip(svc: Obj) -> str:
    """EXTERNAL-IP as kubectl's service printer says it: an ExternalName's name, a
    LoadBalancer's ingress (``<pending>`` until it has one), else ``spec.externalIPs``."""
    spec = svc.get("spec") or {}
    external = list(spec.get("externalIPs") or [])
    if spec.get("type") == "ExternalName":
        return str(spec.get("externalName") or "<none>")
    if spec.get("type") == "LoadBalancer":
        ingress = (((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")) or []
        external += [i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")]
        return ",".join(external) or "<pending>"
    return ",".join(external) or "<none>"


def _service_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), _AGE,
               _col("Selector", priority=1)]

    def cells(svc: Obj, now: datetime) -> list[Any]:
        spec = svc.get("spec") or {}
        ports = ",".join(f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}" if p.get("nodePort")
                         else f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
        selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
        return [svc["metadata"]["name"], spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>",
                _external_ip(svc), ports, age(svc["metadata"].get("creationTimestamp"), now), selector]

    return columns, cells


def _node_status(node: Obj) -> str:
    """Ready, NotReady (Ready False or Unknown) or Unknown (no Ready condition), then
    SchedulingDisabled when cordoned, as kubectl's node printer says it."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)
    status = ["Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"]
    if (node.get("spec") or {}).get("unschedulable"):
        status.append("SchedulingDisabled")
    return ",".join(status)


def node_roles(node: Obj) -> str:
    roles = set()
    for key, value in (node["metadata"].get("labels") or {}).items():
        if key.startswith(NODE_ROLE_PREFIX) and key[len(NODE_ROLE_PREFIX):]:
            roles.add(key[len(NODE_ROLE_PREFIX):])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def _node_address(node: Obj, kind: str) -> str:
    addresses = (node.get("status") or {}).get("addresses") or []
    return next((a.get("address") for a in addresses if isinstance(a, dict) and a.get("type") == kind), None) or "<none>"


def _node_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Status", "The status of the node"), _col("Roles", "The roles of the node"), _AGE,
               _col("Version", "Kubelet Version reported by the node."),
               _col("Internal-IP", "List of addresses reachable to the node.", priority=1),
               _col("External-IP", "List of addresses reachable to the node.", priority=1),
               _col("OS-Image", "OS Image reported by the node from /etc/os-release.", priority=1),
               _col("Kernel-Version", "Kernel Version reported by the node.", priority=1),
               _col("Container-Runtime", "ContainerRuntime Version reported by the node.", priority=1)]

    def cells(node: Obj, now: datetime) -> list[Any]:
        info = (node.get("status") or {}).get("nodeInfo") or {}
        return [node["metadata"]["name"], _node_status(node), node_roles(node),
                age(node["metadata"].get("creationTimestamp"), now), info.get("kubeletVersion", ""),
                _node_address(node, "InternalIP"), _node_address(node, "ExternalIP"),
                info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
                info.get("containerRuntimeVersion") or "<unknown>"]

    return columns, cells


def _hpa_metric(spec: Obj, status: Obj | None) -> str:
    """One metric of TARGETS: ``current/target``; quantities are printed as stored."""
    kind = spec.get("type")
    if kind in ("Resource", "ContainerResource"):
        source = spec.get("resource" if kind == "Resource" else "containerResource") or {}
        current_source = (status or {}).get("resource" if kind == "Resource" else "containerResource")
        target = source.get("target") or {}
        current = (current_source or {}).get("current") or {}
        if target.get("averageValue") is not None:
            return f"{source.get('name', '')}: {current.get('averageValue') or '<unknown>'}/{target['averageValue']}"
        utilization = current.get("averageUtilization")
        wanted = target.get("averageUtilization")
        return (f"{source.get('name', '')}: {'<unknown>' if utilization is None else f'{utilization}%'}/"
                f"{'<auto>' if wanted is None else f'{wanted}%'}")
    if kind == "Pods":
        current = ((status or {}).get("pods") or {}).get("current") or {}
        return f"{current.get('averageValue') or '<unknown>'}/{((spec.get('pods') or {}).get('target') or {}).get('averageValue')}"
    if kind in ("Object", "External"):
        key = kind.lower()
        target = ((spec.get(key) or {}).get("target")) or {}
        current = ((status or {}).get(key) or {}).get("current") or {}
        if target.get("averageValue") is not None:
            return f"{current.get('averageValue') or '<unknown>'}/{target['averageValue']} (avg)"
        return f"{current.get('value') or '<unknown>'}/{target.get('value')}"
    return "<unknown type>"


def hpa_targets(hpa: Obj) -> str:
    """The TARGETS cell: each metric's current/target (statuses matched by position), at
    most two, then ``+ N more...``; ``<none>`` without metrics."""
    specs = (hpa.get("spec") or {}).get("metrics") or []
    if not specs:
        return "<none>"
    statuses = (hpa.get("status") or {}).get("currentMetrics") or []
    shown = [_hpa_metric(spec, statuses[i] if i < len(statuses) else None) for i, spec in enumerate(specs[:2])]
    more = f" + {len(specs) - 2} more..." if len(specs) > 2 else ""
    return ", ".join(shown) + more


def _hpa_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME,
               _col("Reference", "reference to scaled resource; horizontal pod autoscaler will learn the current "
                                 "resource consumption and will set the desired number of pods by using its Scale "
                                 "subresource."),
               _col("Targets", "metrics contains the specifications for which to use to calculate the desired replica "
                               "count (the maximum replica count across all metrics will be used)."),
               _col("MinPods", "minReplicas is the lower limit for the number of replicas to which the autoscaler can "
                               "scale down."),
               _col("MaxPods", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can "
                               "scale up.", type_="integer"),
               _col("Replicas", "currentReplicas is current number of replicas of pods managed by this autoscaler, "
                                "as last seen by the autoscaler.", type_="integer"),
               _AGE]

    def cells(hpa: Obj, now: datetime) -> list[Any]:
        if hpa.get("apiVersion") == hpa_conversion.V1:
            hpa = hpa_conversion.to_v2(hpa)  # kube prints both versions from one internal form
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        min_replicas = spec.get("minReplicas")
        return [hpa["metadata"]["name"], f"{ref.get('kind', '')}/{ref.get('name', '')}", hpa_targets(hpa),
                "<unset>" if min_replicas is None else str(min_replicas), spec.get("maxReplicas", 0),
                (hpa.get("status") or {}).get("currentReplicas", 0),
                age(hpa["metadata"].get("creationTimestamp"), now)]

    return columns, cells


def _pdb_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Min Available", "The minimum number of pods that must be available."),
               _col("Max Unavailable", "The maximum number of pods that may be unavailable."),
               _col("Allowed Disruptions", "Calculated number of pods that may be disrupted at this time.", type_="integer"),
               _AGE]

    def cells(pdb: Obj, now: datetime) -> list[Any]:
        spec = pdb.get("spec") or {}
        bounds = ["N/A" if spec.get(key) is None else str(spec[key]) for key in ("minAvailable", "maxUnavailable")]
        return [pdb["metadata"]["name"], *bounds, (pdb.get("status") or {}).get("disruptionsAllowed", 0),
                age(pdb["metadata"].get("creationTimestamp"), now)]

    return columns, cells


def _priority_class_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME,
               _col("Value", "value represents the integer value of this priority class. This is the actual priority "
                             "that pods receive when they have the name of this class in their pod spec.", type_="integer"),
               _col("Global-Default", "globalDefault specifies whether this PriorityClass should be considered as the "
                                      "default priority for pods that do not have any priority class. Only one "
                                      "PriorityClass can be marked as `globalDefault`. However, if more than one "
                                      "PriorityClasses exists with their `globalDefault` field set to true, the "
                                      "smallest value of such global default PriorityClasses will be used as the "
                                      "default priority.", type_="boolean"),
               _AGE,
               _col("PreemptionPolicy", "preemptionPolicy is the Policy for preempting pods with lower priority. One "
                                        "of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.")]

    def cells(priority_class: Obj, now: datetime) -> list[Any]:
        return [priority_class["metadata"]["name"], priority_class.get("value", 0),
                bool(priority_class.get("globalDefault")), age(priority_class["metadata"].get("creationTimestamp"), now),
                priority_class.get("preemptionPolicy") or ""]

    return columns, cells


def _resource_quota_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _AGE,
               _col("Request", "Request represents a minimum amount of cpu/memory that a container may consume."),
               _col("Limit", "Limits control the maximum amount of cpu/memory that a container may use independent "
                             "of contention on the node.")]

    def cells(quota: Obj, now: datetime) -> list[Any]:
        status = quota.get("status") or {}
        hard, used = status.get("hard") or {}, status.get("used") or {}
        request: list[str] = []
        limit: list[str] = []
        for resource in sorted(hard):
            (limit if resource.startswith("limits.") else request).append(f"{resource}: {used.get(resource, '0')}/{hard[resource]}")
        return [quota["metadata"]["name"], age(quota["metadata"].get("creationTimestamp"), now), ", ".join(request),
                ", ".join(limit)]

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


def _role_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    def cells(role: Obj, now: datetime) -> list[Any]:
        return [role["metadata"]["name"], role["metadata"].get("creationTimestamp", "")]

    return [_NAME, _col("Created At", type_="date")], cells


def _binding_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Role"), _AGE, _col("Users", priority=1), _col("Groups", priority=1),
               _col("ServiceAccounts", priority=1)]

    def cells(binding: Obj, now: datetime) -> list[Any]:
        ref = binding.get("roleRef") or {}
        subjects = [s for s in binding.get("subjects") or [] if isinstance(s, dict)]

        def named(kind: str) -> str:
            return ", ".join(f"{s.get('namespace', '')}/{s.get('name', '')}" if kind == "ServiceAccount"
                             else str(s.get("name", "")) for s in subjects if s.get("kind") == kind)

        return [binding["metadata"]["name"], f"{ref.get('kind', '')}/{ref.get('name', '')}",
                age(binding["metadata"].get("creationTimestamp"), now), named("User"), named("Group"),
                named("ServiceAccount")]

    return columns, cells


def _configmap_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    def cells(cm: Obj, now: datetime) -> list[Any]:
        return [cm["metadata"]["name"], len(cm.get("data") or {}) + len(cm.get("binaryData") or {}),
                age(cm["metadata"].get("creationTimestamp"), now)]

    return [_NAME, _col("Data", type_="integer"), _AGE], cells


def _secret_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    def cells(secret: Obj, now: datetime) -> list[Any]:
        return [secret["metadata"]["name"], secret.get("type") or "Opaque", len(secret.get("data") or {}),
                age(secret["metadata"].get("creationTimestamp"), now)]

    return [_NAME, _col("Type"), _col("Data", type_="integer"), _AGE], cells


def _serviceaccount_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    def cells(sa: Obj, now: datetime) -> list[Any]:
        return [sa["metadata"]["name"], len(sa.get("secrets") or []), age(sa["metadata"].get("creationTimestamp"), now)]

    return [_NAME, _col("Secrets", type_="integer"), _AGE], cells


def _lease_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    def cells(lease: Obj, now: datetime) -> list[Any]:
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        return [lease["metadata"]["name"], holder, age(lease["metadata"].get("creationTimestamp"), now)]

    return [_NAME, _col("Holder"), _AGE], cells


def _more(items: list[str], shown: int = 3) -> str:
    """kubectl's ``a,b,c + 2 more...``."""
    text = ",".join(items[:shown])
    return f"{text} + {len(items) - shown} more..." if len(items) > shown else text


def _host_port(ip: str, port: Any) -> str:
    """Go's ``net.JoinHostPort``: an IPv6 address in brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def endpoints_cell(endpoints: Obj) -> str:
    """ENDPOINTS as kubectl prints it: each port's ready addresses in turn (each subset's
    ports, then their addresses), the first three, then ``+ N more...``; ``<none>`` without
    subsets."""
    subsets = endpoints.get("subsets") or []
    if not subsets:
        return "<none>"
    items: list[str] = []
    for subset in subsets:
        ips = [a.get("ip", "") for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        if not ports:  # a headless Service without ports
            items.extend(ips)
        for port in ports:
            items.extend(_host_port(ip, port.get("port")) for ip in ips)
    return _more(items)


def _endpoints_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    def cells(endpoints: Obj, now: datetime) -> list[Any]:
        return [endpoints["metadata"]["name"], endpoints_cell(endpoints), age(endpoints["metadata"].get("creationTimestamp"), now)]

    return [_NAME, _col("Endpoints", "Endpoints is the list of addresses the service selects."), _AGE], cells


def _endpointslice_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    def cells(slice_: Obj, now: datetime) -> list[Any]:
        ports = [str(p["port"]) if p.get("port") is not None else "<unset>" for p in slice_.get("ports") or []]
        addresses = [a for e in slice_.get("endpoints") or [] for a in e.get("addresses") or []]
        return [slice_["metadata"]["name"], slice_.get("addressType", ""), _more(ports) or "<unset>",
                _more(addresses) or "<unset>", age(slice_["metadata"].get("creationTimestamp"), now)]

    return [_NAME, _col("AddressType"), _col("Ports"), _col("Endpoints"), _AGE], cells


def _job_status(job: Obj) -> str:
    """kubectl's Job STATUS: the terminal or suspended condition, else Running."""
    conditions = {c.get("type") for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
    for kind in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"):
        if kind in conditions:
            return kind
    return "Terminating" if job["metadata"].get("deletionTimestamp") else "Running"


def _job_completions(job: Obj) -> str:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = status.get("succeeded", 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = spec.get("parallelism", 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Status", "Status of the job."),
               _col("Completions", "The completion status of the job as succeeded/completions."),
               _col("Duration", "Time required to complete the job."), _AGE,
               _col("Containers", "Names of each container in the template.", priority=1),
               _col("Images", "Images referenced by each container in the template.", priority=1),
               _col("Selector", "Query over pods that should match the replicas count.", priority=1)]

    def cells(job: Obj, now: datetime) -> list[Any]:
        status = job.get("status") or {}
        start = status.get("startTime")
        duration = ""
        if start:
            end = status.get("completionTime")
            then = datetime.fromisoformat(end.replace("Z", "+00:00")) if end else now
            duration = human_duration((then - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds())
        containers = ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        selector = ((job.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return [job["metadata"]["name"], _job_status(job), _job_completions(job), duration,
                age(job["metadata"].get("creationTimestamp"), now),
                ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
                ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"]

    return columns, cells


def _template_cells(spec: Obj) -> list[str]:
    """The wide columns of a workload: its template's containers and images, and its selector."""
    containers = (spec.get("template") or {}).get("spec", {}).get("containers") or []
    return [",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
            selector_string(spec.get("selector") or {}) or "<none>"]


_TEMPLATE_COLUMNS = [_col("Containers", "Names of each container in the template.", priority=1),
                     _col("Images", "Images referenced by each container in the template.", priority=1),
                     _col("Selector", "Label selector for pods. Existing ReplicaSets whose pods are selected by this "
                                      "will be the ones affected by this deployment.", priority=1)]


def _deployment_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Ready", "Number of the pod with ready state"),
               _col("Up-to-date", "Total number of non-terminated pods targeted by this deployment that have the "
                                  "desired template spec.", type_="integer"),
               _col("Available", "Total number of available pods (ready for at least minReadySeconds) targeted by "
                                 "this deployment.", type_="integer"), _AGE, *_TEMPLATE_COLUMNS]

    def cells(deployment: Obj, now: datetime) -> list[Any]:
        spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
        return [deployment["metadata"]["name"], f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
                status.get("updatedReplicas", 0), status.get("availableReplicas", 0),
                age(deployment["metadata"].get("creationTimestamp"), now), *_template_cells(spec)]

    return columns, cells


def _replicaset_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Desired", "Number of desired pods.", type_="integer"),
               _col("Current", "Number of actual replicas.", type_="integer"),
               _col("Ready", "The number of ready replicas for this replica set.", type_="integer"), _AGE, *_TEMPLATE_COLUMNS]

    def cells(replicaset: Obj, now: datetime) -> list[Any]:
        spec, status = replicaset.get("spec") or {}, replicaset.get("status") or {}
        return [replicaset["metadata"]["name"], spec.get("replicas", 0), status.get("replicas", 0),
                status.get("readyReplicas", 0), age(replicaset["metadata"].get("creationTimestamp"), now),
                *_template_cells(spec)]

    return columns, cells


def _daemonset_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Desired", "The desired number of pods.", type_="integer"),
               _col("Current", "The current number of pods.", type_="integer"),
               _col("Ready", "The number of pods ready.", type_="integer"),
               _col("Up-to-date", "The number of pods updated.", type_="integer"),
               _col("Available", "The number of pods ready and available.", type_="integer"),
               _col("Node Selector", "Node selector of the pods."), _AGE, *_TEMPLATE_COLUMNS]

    def cells(daemonset: Obj, now: datetime) -> list[Any]:
        spec, status = daemonset.get("spec") or {}, daemonset.get("status") or {}
        selector = (spec.get("template") or {}).get("spec", {}).get("nodeSelector") or {}
        return [daemonset["metadata"]["name"], status.get("desiredNumberScheduled", 0),
                status.get("currentNumberScheduled", 0), status.get("numberReady", 0),
                status.get("updatedNumberScheduled", 0), status.get("numberAvailable", 0),
                ",".join(f"{k}={v}" for k, v in selector.items()) or "<none>",
                age(daemonset["metadata"].get("creationTimestamp"), now), *_template_cells(spec)]

    return columns, cells


def _statefulset_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Ready", "Number of the pod with ready state"), _AGE, *_TEMPLATE_COLUMNS[:2]]

    def cells(statefulset: Obj, now: datetime) -> list[Any]:
        spec, status = statefulset.get("spec") or {}, statefulset.get("status") or {}
        return [statefulset["metadata"]["name"], f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
                age(statefulset["metadata"].get("creationTimestamp"), now), *_template_cells(spec)[:2]]

    return columns, cells


def _controller_revision_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Controller", "Controller of the object"),
               _col("Revision", "Revision of the ControllerRevision", type_="integer"), _AGE]

    def cells(revision: Obj, now: datetime) -> list[Any]:
        meta = revision["metadata"]
        ref = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        controller = "<none>"
        if ref is not None:
            group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            controller = f"{str(ref.get('kind')).lower()}{'.' + group if group else ''}/{ref.get('name')}"
        return [meta["name"], controller, revision.get("revision", 0), age(meta.get("creationTimestamp"), now)]

    return columns, cells


def _cronjob_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    columns = [_NAME, _col("Schedule", "The schedule in Cron format."),
               _col("Timezone", "The time zone of the schedule."), _col("Suspend", "Whether the CronJob is suspended.", type_="boolean"),
               _col("Active", "The number of jobs running.", type_="integer"),
               _col("Last Schedule", "When the last job was scheduled."), _AGE,
               _col("Containers", "Names of each container in the template.", priority=1),
               _col("Images", "Images referenced by each container in the template.", priority=1),
               _col("Selector", "Query over pods that should match the replicas count.", priority=1)]

    def cells(cronjob: Obj, now: datetime) -> list[Any]:
        spec, status = cronjob.get("spec") or {}, cronjob.get("status") or {}
        last = status.get("lastScheduleTime")
        containers = (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        return [cronjob["metadata"]["name"], spec.get("schedule", ""), spec.get("timeZone") or "<none>", "True" if spec.get("suspend") else "False",
                len(status.get("active") or []), age(last, now) if last else "<none>",
                age(cronjob["metadata"].get("creationTimestamp"), now),
                ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers), "<none>"]

    return columns, cells


def _created_at_columns() -> tuple[list[Column], Callable[[Obj, datetime], list[Any]]]:
    """kube's table of CustomResourceDefinitions and LimitRanges (and its default for resources
    without a printer of their own)."""
    def cells(obj: Obj, now: datetime) -> list[Any]:
        return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp") or ""]

    return [_NAME, _col("Created At", "CreationTimestamp is a timestamp representing the server time when this object was created.",
                        type_="date")], cells


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
    ("", "configmaps"): _configmap_columns,
    ("", "endpoints"): _endpoints_columns,
    ("discovery.k8s.io", "endpointslices"): _endpointslice_columns,
    ("", "secrets"): _secret_columns,
    ("", "serviceaccounts"): _serviceaccount_columns,
    ("coordination.k8s.io", "leases"): _lease_columns,
    ("apiextensions.k8s.io", "customresourcedefinitions"): _created_at_columns,
    ("", "limitranges"): _created_at_columns,
    ("", "resourcequotas"): _resource_quota_columns,
    ("", "events"): _event_columns,
    ("events.k8s.io", "events"): _event_columns,
    ("autoscaling", "horizontalpodautoscalers"): _hpa_columns,
    ("batch", "jobs"): _job_columns,
    ("batch", "cronjobs"): _cronjob_columns,
    ("apps", "deployments"): _deployment_columns,
    ("apps", "replicasets"): _replicaset_columns,
    ("apps", "daemonsets"): _daemonset_columns,
    ("apps", "statefulsets"): _statefulset_columns,
    ("apps", "controllerrevisions"): _controller_revision_columns,
    ("policy", "poddisruptionbudgets"): _pdb_columns,
    ("scheduling.k8s.io", "priorityclasses"): _priority_class_columns,
    ("rbac.authorization.k8s.io", "roles"): _role_columns,
    ("rbac.authorization.k8s.io", "clusterroles"): _role_columns,
    ("rbac.authorization.k8s.io", "rolebindings"): _binding_columns,
    ("rbac.authorization.k8s.io", "clusterrolebindings"): _binding_columns,
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
