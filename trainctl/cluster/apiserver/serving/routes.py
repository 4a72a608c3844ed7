"""Resource requests: a path parsed into a ``Target``, and the table of routes that serves it.

kube-apiserver installs one handler per verb on every resource and subresource it serves;
here ``ROUTES`` maps a request's method and its ``Target.scope`` (the collection, the
object, or a subresource with handlers of its own) to a ``Route``: the verb the request is
counted under in ``/metrics`` and the handler, a method of ``Handlers``. A subresource
without handlers of its own (``status``, ``finalize``) is served by the object's routes,
which pass it on to ``writes``; a method without a route is 405.

Adding a verb is one handler method on ``Handlers`` and one line in ``ROUTES``.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from aiohttp import web

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry, ResourceType
from trainctl.cluster.apiserver.auth import reviews
from trainctl.cluster.apiserver.auth.access import Access
from trainctl.cluster.apiserver.serving import body, connect, params, pod_logs, proxy, tables, watch
from trainctl.cluster.apiserver.serving.responses import json_response, warning_headers
from trainctl.cluster.apiserver.storage.resources import Resources
from trainctl.cluster.apiserver.storage.writes import WriteOptions

Obj = dict[str, Any]

VERB = web.RequestKey("verb", str)  # the verb and resource a request is counted under in /metrics
RESOURCE = web.RequestKey("resource", str)
USER = web.RequestKey("user", dict)  # who the request acts as (access.Access.admit)

COLLECTION = "collection"  # the scopes of a Target besides its subresources
OBJECT = "object"
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass(frozen=True)
class Target:
    """What a resource path names: a collection (no name), an object, or its subresource."""

    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None

    @property
    def scope(self) -> str:
        """The second half of a ``ROUTES`` key."""
        if self.name is None:
            return COLLECTION
        if self.subresource in _OWN_ROUTES:
            return self.subresource
        return OBJECT


def parse(registry: Registry, parts: list[str]) -> Target:
    """The target of a path under ``/api`` or ``/apis`` (split at ``/``); 404 for what is not served."""
    if parts[0] == "api":
        group, version, rest = "", parts[1] if len(parts) > 1 else "", parts[2:]
    else:
        if len(parts) < 3:
            raise errors.page_not_found()
        group, version, rest = parts[1], parts[2], parts[3:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3 and rest[2] == proxy.SUBRESOURCE:
        rest = rest[:3]  # the rest is the proxied path
    if not rest or len(rest) > 3:
        raise errors.page_not_found()
    rtype = registry.get(group, version, rest[0])
    if rtype is None:
        raise errors.page_not_found()
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    if namespace is not None and not rtype.namespaced:
        raise errors.page_not_found()
    if subresource is not None and subresource not in rtype.subresources:
        raise errors.page_not_found()
    return Target(rtype, namespace, name, subresource)


def table_include(request: web.BaseRequest) -> str | None:
    """How much of each object a Table asked for carries, or None when no Table is asked for."""
    return params.table_include(request.headers.get("Accept", ""), request.query)


class Handlers:
    """One method per verb: each reads its request, calls the storage and answers."""

    def __init__(self, resources: Resources, access: Access, data_dir: Path, kubelet_tls: ssl.SSLContext,
                 bookmark_interval: float, closing: Callable[[], bool]) -> None:
        self.resources = resources
        self.store = resources.store
        self.registry = resources.registry
        self.access = access
        self.data_dir = data_dir
        self.kubelet_tls = kubelet_tls  # how kubelets are dialled (the API server's client certificate)
        self.bookmark_interval = bookmark_interval
        self._closing = closing

    async def serve(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        request[RESOURCE] = target.rtype.plural
        if target.name is not None and target.rtype.namespaced and target.namespace is None:
            raise errors.page_not_found()
        route = ROUTES.get((request.method, target.scope))
        if route is None:
            raise errors.method_not_allowed()
        request[VERB] = route.verb
        return await route.handler(self, request, target)

    # --- collections ------------------------------------------------------------------------

    async def list(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        rtype, query = target.rtype, request.query
        if params.go_bool(query, "watch"):
            request[VERB] = "WATCH"
            return await watch.stream(request, rtype, target.namespace, self.store, bookmark_interval=self.bookmark_interval)
        matches = params.matcher(query, rtype)
        limit = max(params.int_param(query, "limit") or 0, 0)
        if query.get("resourceVersionMatch") == "Exact" and query.get("resourceVersion") not in (None, str(self.store.committed_rv)):
            raise errors.expired(query.get("resourceVersion", ""))
        items, meta = self.resources.reads.list(rtype, target.namespace, matches, limit, query.get("continue"))
        include = table_include(request)
        if include is not None:
            return json_response(tables.table(rtype, items, include, meta))
        return json_response({"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version, "metadata": meta, "items": items})

    async def create(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        rtype = target.rtype
        if rtype.namespaced and target.namespace is None:
            raise errors.method_not_allowed()
        if reviews.handles(rtype.group, rtype.plural):
            return json_response(self.access.review(rtype.group, rtype.plural, target.namespace,
                                                    await body.decoded(request), request[USER]), 201)
        obj, warnings = await self.resources.writes.create(
            rtype, target.namespace, await body.decoded(request), options=_write_options(request))
        return json_response(obj, 201, warning_headers(warnings))

    async def delete_collection(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        rtype, query = target.rtype, request.query
        options = params.delete_options(await body.decoded(request), query)
        deleted = await self.resources.deletion.delete_collection(rtype, target.namespace, params.matcher(query, rtype), options)
        return json_response({"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version,
                              "metadata": {"resourceVersion": str(self.store.committed_rv)}, "items": deleted})

    # --- objects (and the subresources without handlers of their own) -----------------------

    async def get(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        obj = self.resources.reads.get(target.rtype, target.namespace, target.name or "")
        include = table_include(request)
        if include is not None:
            return json_response(tables.table(target.rtype, [obj], include, {"resourceVersion": obj["metadata"]["resourceVersion"]}))
        return json_response(obj)

    async def update(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        obj, warnings = await self.resources.writes.update(
            target.rtype, target.namespace, target.name or "", await body.decoded(request),
            subresource=target.subresource, options=_write_options(request))
        return json_response(obj, 200, warning_headers(warnings))

    async def patch(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        content_type = body.content_type(request)
        if content_type == "application/apply-patch+yaml":
            request[VERB] = "APPLY"
        raw = await body.read(request)
        obj, created, warnings = await self.resources.writes.patch(
            target.rtype, target.namespace, target.name or "", raw, content_type=content_type,
            subresource=target.subresource, options=_write_options(request, patching=True))
        return json_response(obj, 201 if created else 200, warning_headers(warnings))

    async def delete(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        rtype, name, query = target.rtype, target.name or "", request.query
        options = params.delete_options(await body.decoded(request), query)
        obj, gone = await self.resources.deletion.delete(rtype, target.namespace, name, options, params.dry_run(query))
        if rtype.is_custom and gone:
            return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                  "details": {"name": name, "group": rtype.group, "kind": rtype.plural,
                                              "uid": obj["metadata"].get("uid")}})
        return json_response(obj)

    # --- subresources -----------------------------------------------------------------------

    async def get_scale(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        return json_response(self.resources.reads.get_scale(target.rtype, target.namespace, target.name or ""))

    async def update_scale(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        document = await body.decoded(request)
        return json_response(await self.resources.writes.update_scale(target.rtype, target.namespace, target.name or "", document,
                                                                      options=_write_options(request)))

    async def patch_scale(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        obj, _, _ = await self.resources.writes.patch(target.rtype, target.namespace, target.name or "", await body.read(request),
                                                      content_type=body.content_type(request), subresource="scale",
                                                      options=_write_options(request, patching=True))
        return json_response(obj)

    async def bind(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        await self.resources.writes.bind(target.rtype, target.namespace, target.name or "", await body.decoded(request))
        return _created()

    async def evict(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        await self.resources.evictions.evict(target.rtype, target.namespace or "", target.name or "",
                                             await body.decoded(request), dry_run=params.dry_run(request.query))
        return _created()

    async def request_token(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        return json_response(self.access.token_request(target.namespace or "", target.name or "", await body.decoded(request)), 201)

    async def log(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        rtype = target.rtype
        pod = self.resources.reads.get(rtype, target.namespace, target.name or "")
        uid = pod["metadata"]["uid"]
        key, namespace, name = rtype.storage_key, target.namespace or "", pod["metadata"]["name"]

        def current() -> Obj | None:
            if self._closing():
                return None
            now = self.store.read(key, namespace, name)
            return now if now is not None and now["metadata"].get("uid") == uid else None

        return await pod_logs.respond(request, pod, self.data_dir, current)

    async def connect(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        """exec, attach and portforward: proxied to the kubelet of the pod's node."""
        pod = self.resources.reads.get(target.rtype, target.namespace, target.name or "")
        node = self._node((pod.get("spec") or {}).get("nodeName") or "")
        return await connect.proxy(request, pod, node, target.subresource or "", self.kubelet_tls)

    async def proxy(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        """pods/, services/ and nodes/NAME/proxy[/PATH]: HTTP to the pod, a Service's backend or the kubelet."""
        rtype, name = target.rtype, target.name or ""
        path = proxy.rest_of_path(request, 7 if target.namespace is not None else 5)
        if rtype.plural == "nodes":
            if path.split("?", 1)[0] not in proxy.NODE_PATHS:
                raise errors.page_not_found()
            return await proxy.to_kubelet(request, self._node(name), name, path, self.kubelet_tls)
        scheme, name, port = proxy.split_name(name)
        obj = self.resources.reads.get(rtype, target.namespace, name)
        if rtype.plural == "pods":
            pod, number = obj, proxy.pod_port(obj, port, scheme)
        else:
            pods = self.registry.get("", "v1", "pods")
            assert pods is not None
            pod, number = proxy.service_backend(obj, self.store.list(pods.storage_key, target.namespace), port)
        return await proxy.to_pod(request, pod, self._node(pod["spec"]["nodeName"]), scheme, number, path,
                                  self.kubelet_tls)

    def _node(self, name: str) -> Obj | None:
        nodes = self.registry.get("", "v1", "nodes")
        return self.store.read(nodes.storage_key, "", name) if nodes is not None and name else None


def _write_options(request: web.BaseRequest, *, patching: bool = False) -> WriteOptions:
    return params.write_options(request.query, patching=patching, user_agent=request.headers.get("User-Agent", ""))


def _created() -> web.Response:
    return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)


class Route(NamedTuple):
    verb: str  # as /metrics counts it; ``list`` makes it WATCH and ``patch`` APPLY where they are
    handler: Callable[[Handlers, web.BaseRequest, Target], Awaitable[web.StreamResponse]]


ROUTES: dict[tuple[str, str], Route] = {
    ("GET", COLLECTION): Route("LIST", Handlers.list),
    ("POST", COLLECTION): Route("CREATE", Handlers.create),
    ("DELETE", COLLECTION): Route("DELETECOLLECTION", Handlers.delete_collection),
    ("GET", OBJECT): Route("GET", Handlers.get),
    ("PUT", OBJECT): Route("UPDATE", Handlers.update),
    ("PATCH", OBJECT): Route("PATCH", Handlers.patch),
    ("DELETE", OBJECT): Route("DELETE", Handlers.delete),
    ("GET", "scale"): Route("GET", Handlers.get_scale),
    ("PUT", "scale"): Route("UPDATE", Handlers.update_scale),
    ("PATCH", "scale"): Route("PATCH", Handlers.patch_scale),
    ("POST", "binding"): Route("CREATE", Handlers.bind),
    ("POST", "eviction"): Route("CREATE", Handlers.evict),
    ("POST", "token"): Route("CREATE", Handlers.request_token),
    ("GET", "log"): Route("CONNECT", Handlers.log),
    **{(method, subresource): Route("CONNECT", Handlers.connect)
       for subresource in connect.SUBRESOURCES for method in ("GET", "POST")},
    **{(method, proxy.SUBRESOURCE): Route("CONNECT", Handlers.proxy)
       for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")},
}
_OWN_ROUTES = {scope for _, scope in ROUTES} - {COLLECTION, OBJECT}
