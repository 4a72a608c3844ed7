"""``pods/NAME/proxy``, ``services/NAME/proxy`` and ``nodes/NAME/proxy``: HTTP to a pod, a
Service's backend or a kubelet, through the API server (``kubectl proxy``, ``kubectl get --raw``).

The name says where: ``[scheme:]name[:port]`` (kube's ``SplitSchemeNamePort``), scheme
``http`` or ``https``. A pod's port is a number or one of its containers' named ports; a
Service's is one of its ports, by number or name (none: its only port), mapped to the
``targetPort`` of a running pod its selector picks. The address is never taken from the
request: the request names an object, and the API server sends it to the kubelet of the node
that runs the chosen pod, which dials that pod's own address in the pod network (the API
server may not reach the pod network itself). ``nodes/NAME/proxy/PATH`` reaches the kubelet's
read-only paths only (:data:`NODE_PATHS`). RBAC is kube's: ``pods/proxy``,
``services/proxy`` and ``nodes/proxy``, with the verb of the method (``get`` for GET).
"""

from __future__ import annotations

import re
import ssl
from typing import Any
from urllib.parse import quote

from aiohttp import web

from trainctl.cluster import http_relay
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.serving import connect

Obj = dict[str, Any]
SUBRESOURCE = "proxy"
SCHEMES = ("http", "https")
NODE_PATHS = ("/healthz", "/pods")  # what a kubelet here serves that kube's node proxy reaches
_PORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def split_name(text: str) -> tuple[str, str, str]:
    """``[scheme:]name[:port]`` as (scheme, name, port); a 400 for anything else."""
    parts = text.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        raise errors.bad_request(f"invalid service request {text!r}")
    if scheme not in ("", *SCHEMES) or not name:
        raise errors.bad_request(f"invalid service request {text!r}: the scheme must be http or https")
    if port and not (port.isdigit() and 0 < int(port) < 65536) and not _PORT_NAME.match(port):
        raise errors.bad_request(f"invalid port {port!r}: a number in 1-65535 or a port name")
    return scheme or "http", name, port


def rest_of_path(request: web.BaseRequest, leading: int) -> str:
    """The path after ``.../proxy`` (``leading`` segments before it, ``proxy`` included),
    with the query: ``/`` when there is none."""
    segments = request.rel_url.raw_path.split("/")[1:]
    rest = "/" + "/".join(segments[leading:])
    if request.rel_url.raw_query_string:
        rest += f"?{request.rel_url.raw_query_string}"
    return rest


def pod_port(pod: Obj, port: str, scheme: str) -> int:
    """``port`` of ``pod``: a number, or the name of one of its containers' ports."""
    if not port:
        return 443 if scheme == "https" else 80
    if port.isdigit():
        return int(port)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == port and isinstance(declared.get("containerPort"), int):
                return int(declared["containerPort"])
    raise errors.bad_request(f"pod {pod['metadata']['name']} has no port named {port!r}")


def _running(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and bool(status.get("podIP")) and bool((pod.get("spec") or {}).get("nodeName"))


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def service_backend(service: Obj, pods: list[Obj], port: str) -> tuple[Obj, int]:
    """The pod (a ready one first) and its port that ``service``'s ``port`` sends to."""
    name = service["metadata"]["name"]
    ports = (service.get("spec") or {}).get("ports") or []
    if port:
        chosen = [p for p in ports if str(p.get("port")) == port or p.get("name") == port]
    else:
        chosen = ports if len(ports) == 1 else [p for p in ports if not p.get("name")]
    selector = (service.get("spec") or {}).get("selector") or {}
    if not chosen or not selector:
        raise errors.ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"',
                              {"name": name, "kind": "services"})
    target = chosen[0].get("targetPort", chosen[0].get("port"))
    picked = [p for p in pods if _running(p)
              and all(((p["metadata"].get("labels") or {}).get(k)) == v for k, v in selector.items())]
    picked.sort(key=lambda p: (not _ready(p), p["metadata"]["name"]))
    for pod in picked:
        try:
            return pod, pod_port(pod, str(target), "http")
        except errors.ApiError:
            continue  # this pod does not name the target port
    raise errors.ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"',
                          {"name": name, "kind": "services"})


async def to_pod(request: web.BaseRequest, pod: Obj, node: Obj | None, scheme: str, port: int, path: str,
                 context: ssl.SSLContext) -> web.StreamResponse:
    """The request, sent to ``pod``'s ``port`` through its node's kubelet."""
    meta = pod["metadata"]
    if not _running(pod):
        raise errors.ApiError(503, "ServiceUnavailable", f"pod {meta['name']} is not running: no address to proxy to",
                              {"name": meta["name"], "kind": "pods"})
    kubelet_path = (f"/proxy/{quote(meta['namespace'], safe='')}/{quote(meta['name'], safe='')}"
                    f"/{scheme}/{port}{path}")
    return await to_kubelet(request, node, pod["spec"]["nodeName"], kubelet_path, context)


async def to_kubelet(request: web.BaseRequest, node: Obj | None, node_name: str, path: str,
                     context: ssl.SSLContext) -> web.StreamResponse:
    host, port = connect.kubelet_endpoint(node, node_name)
    reader, writer = await connect.dial(host, port, node_name, context)
    try:
        return await http_relay.relay(request, reader, writer, path, f"{host}:{port}")
    except (OSError, http_relay.BadResponse, TimeoutError) as exc:
        raise errors.ApiError(502, "InternalError", f"error trying to reach the kubelet of node {node_name!r}: {exc}",
                              {}) from None
