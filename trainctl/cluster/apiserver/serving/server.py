"""The HTTP face of the server: routing, authentication, content negotiation (JSON or
Table), discovery and ``/metrics``.

Everything about objects is decided in ``resources``; this module translates Kubernetes
REST paths into those calls and their results (or ``ApiError``) back into responses real
clients accept. Query parameters are parsed in ``params``, bodies read in ``body``, watch
streams served by ``watch``, log streams by ``logs`` and the in-memory Metrics API
(``metrics.k8s.io``) by ``metrics_api``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from trainctl.cluster.apiserver.apimachinery import errors, limits
from trainctl.cluster.apiserver.apimachinery.registry import Registry, ResourceType
from trainctl.cluster.apiserver.auth import access, pki, reviews, tokens
from trainctl.cluster.apiserver.serving import body, connect, discovery, logs, openapi, params, tables, watch
from trainctl.cluster.apiserver.serving.metrics import Metrics
from trainctl.cluster.apiserver.serving.responses import error_response, json_response, warning_headers
from trainctl.cluster.apiserver.storage import metrics_api
from trainctl.cluster.apiserver.storage.resources import Resources
from trainctl.cluster.apiserver.storage.store import Store

Obj = dict[str, Any]
log = logging.getLogger(__name__)

_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
STATE_FILE = "state.db"
VERB = web.RequestKey("verb", str)  # the verb and resource a request is counted under in /metrics
RESOURCE = web.RequestKey("resource", str)
USER = web.RequestKey("user", dict)  # who the request acts as (access.Access.admit)


@dataclass(frozen=True)
class RequestInfo:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class ApiServer:
    def __init__(self, data_dir: Path, token: str, service_cidr: str = "127.96.0.0/16",
                 bookmark_interval: float = 30.0, watch_window: int = 10_000, fsync: bool = False) -> None:
        self.data_dir = data_dir
        self.token = token
        self._closing = False
        self.store = Store(data_dir / STATE_FILE, window=watch_window, fsync=fsync)
        self.access = access.Access(self.store, token, tokens.TokenIssuer(pki.service_account_key(data_dir / "pki")))
        self.registry = Registry()
        for rtype in metrics_api.resource_types():
            self.registry.add(rtype)
        self.metrics_api = metrics_api.MetricsApi(self.store)
        self.resources = Resources(self.store, self.registry, service_cidr)
        self.metrics = Metrics()
        self.openapi = openapi.Documents(self.registry)  # hook: OpenAPI documents (openapi)
        self.bookmark_interval = bookmark_interval
        self.address = ""
        # aiohttp's low-level server: no router or middleware chain, a third less work per request.
        self.http = web.Server(self._handle, request_factory=self._make_request, handler_cancellation=True)

    def _make_request(self, message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
        return web.BaseRequest(message, payload, protocol, writer, task, asyncio.get_running_loop(),
                               client_max_size=limits.MAX_REQUEST_BYTES)

    async def start(self) -> None:
        await self.resources.start()

    async def listening(self, host: str, port: int) -> None:
        """The server listens on ``host:port``: say so in the ``kubernetes`` Service."""
        self.address = f"{host}:{port}"
        await self.resources.bootstrap.keep_publishing(host, port)

    def end_streams(self) -> None:
        """Finish every watch and log stream, so that shutdown need not wait for clients."""
        self._closing = True
        self.store.end_watches()

    async def close(self) -> None:
        await self.resources.close()
        self.store.close()

    # --- every request: auth, errors, metrics ---------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        started = time.perf_counter()
        request[VERB] = request.method
        request[RESOURCE] = ""
        try:
            if request.path not in access.PUBLIC_PATHS:
                request[USER] = self.access.admit(request.method, request.path, request.query, request.headers)
            response = await self._dispatch(request)
        except errors.ApiError as exc:
            response = error_response(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path)
            response = error_response(errors.internal(f"Internal error occurred: {exc}"))
        if request[RESOURCE]:
            self.metrics.observe(request[VERB], request[RESOURCE], response.status, time.perf_counter() - started)
        return response

    # --- routing ----------------------------------------------------------------------------

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/version":
            return json_response(discovery.KUBERNETES_VERSION)
        if path == "/metrics":
            for rtype in {t.storage_key: t for t in reversed(list(self.registry))}.values():  # each store by its first type
                self.metrics.objects.labels(rtype.group_resource).set(self.store.count(rtype.storage_key))
            self.metrics.watchers.set(self.store.watcher_count())
            body, content_type = self.metrics.render()
            return web.Response(body=body, headers={"Content-Type": content_type})
        if path in ("/openapi/v2", "/openapi/v3") or path.startswith("/openapi/v3/"):
            return self._openapi(request, path)
        parts = [p for p in path.split("/") if p]
        if not parts or parts[0] not in ("api", "apis"):
            raise errors.page_not_found()
        if request.method == "GET":
            discovered = self._discovery(request, parts)
            if discovered is not None:
                return discovered
        if parts[1:3] == [metrics_api.GROUP, metrics_api.VERSION]:
            return await self._serve_metrics(request, parts[3:])
        info = self._parse(parts)
        return await self._serve(request, info)

    def _discovery(self, request: web.BaseRequest, parts: list[str]) -> web.Response | None:
        accept = request.headers.get("Accept", "")
        if parts == ["api"]:
            if discovery.wants_aggregated(accept):
                return json_response(discovery.aggregated(self.registry, core=True),
                                     content_type=discovery.AGGREGATED_CONTENT_TYPE)
            return json_response(discovery.legacy_core(self.address))
        if parts == ["apis"]:
            if discovery.wants_aggregated(accept):
                return json_response(discovery.aggregated(self.registry, core=False),
                                     content_type=discovery.AGGREGATED_CONTENT_TYPE)
            return json_response(discovery.legacy_groups(self.registry))
        if parts[0] == "apis" and len(parts) == 2:
            group = discovery.legacy_group(self.registry, parts[1])
            if group is None:
                raise errors.page_not_found()
            return json_response(group)
        gv = ("", parts[1]) if parts[0] == "api" and len(parts) == 2 else (
            (parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else None)
        if gv is not None:
            listed = discovery.resource_list(self.registry, *gv)
            if listed is None:
                raise errors.page_not_found()
            return json_response(listed)
        return None

    def _openapi(self, request: web.BaseRequest, path: str) -> web.Response:
        # hook: the documents come from openapi.Documents (built-in schemas and CRD schemas).
        if path == "/openapi/v3":
            return json_response(self.openapi.v3_index())
        if path == "/openapi/v2":
            body, content_type, digest = self.openapi.v2_encoded(request.headers.get("Accept", ""))
            return web.Response(body=body, headers={"Content-Type": content_type, "Etag": f'"{digest}"'})
        parts = path[len("/openapi/v3/"):].split("/")
        found = None
        if parts[0] == "api" and len(parts) == 2:
            found = self.openapi.v3("", parts[1])
        elif parts[0] == "apis" and len(parts) == 3:
            found = self.openapi.v3(parts[1], parts[2])
        if found is None:
            raise errors.page_not_found()
        document, digest = found
        # A URL carrying the current hash names content that never changes: clients may cache it.
        cache = "public, immutable, max-age=31536000" if request.query.get("hash") == digest else "no-cache, private"
        return json_response(document, headers={"Cache-Control": cache, "Etag": f'"{digest}"'})

    def _parse(self, parts: list[str]) -> RequestInfo:
        if parts[0] == "api":
            group, version, rest = "", parts[1] if len(parts) > 1 else "", parts[2:]
        else:
            if len(parts) < 3:
                raise errors.page_not_found()
            group, version, rest = parts[1], parts[2], parts[3:]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise errors.page_not_found()
        rtype = self.registry.get(group, version, rest[0])
        if rtype is None:
            raise errors.page_not_found()
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        if namespace is not None and not rtype.namespaced:
            raise errors.page_not_found()
        if subresource is not None and subresource not in rtype.subresources:
            raise errors.page_not_found()
        return RequestInfo(rtype, namespace, name, subresource)

    # --- resource requests ------------------------------------------------------------------

    async def _serve(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        rtype, query, method = info.rtype, request.query, request.method
        request[RESOURCE] = rtype.plural
        if info.name is None:
            if method == "GET":
                watching = params.go_bool(query, "watch")
                request[VERB] = "WATCH" if watching else "LIST"
                return await (self._watch(request, info) if watching else self._list(request, info))
            if method == "POST":
                request[VERB] = "CREATE"
                if rtype.namespaced and info.namespace is None:
                    raise errors.method_not_allowed()
                if reviews.handles(rtype.group, rtype.plural):
                    return json_response(self.access.review(rtype.group, rtype.plural, info.namespace,
                                                            await body.decoded(request), request[USER]), 201)
                obj, warnings = await self.resources.writes.create(
                    rtype, info.namespace, await body.decoded(request), options=params.write_options(query))
                return json_response(obj, 201, warning_headers(warnings))
            if method == "DELETE":
                request[VERB] = "DELETECOLLECTION"
                options = params.delete_options(await body.decoded(request), query)
                deleted = await self.resources.deletion.delete_collection(rtype, info.namespace, params.matcher(query, rtype), options)
                kind = f"{rtype.kind}List"
                return json_response({"kind": kind, "apiVersion": rtype.api_version,
                                      "metadata": {"resourceVersion": str(self.store.committed_rv)}, "items": deleted})
            raise errors.method_not_allowed()
        if rtype.namespaced and info.namespace is None:
            raise errors.page_not_found()
        if info.subresource == "log":
            request[VERB] = "CONNECT"
            return await self._log(request, info)
        if info.subresource in connect.SUBRESOURCES:
            request[VERB] = "CONNECT"
            return await self._connect(request, info)
        if info.subresource in ("binding", "eviction"):
            if method != "POST":
                raise errors.method_not_allowed()
            request[VERB] = "CREATE"
            document = await body.decoded(request)
            if info.subresource == "binding":
                await self.resources.writes.bind(rtype, info.namespace, info.name, document)
            else:
                requested = document.get("deleteOptions") if isinstance(document, dict) else None
                await self.resources.deletion.delete(rtype, info.namespace, info.name, requested if isinstance(requested, dict) else {})
            return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)
        if info.subresource == "scale":
            return await self._scale(request, rtype, info.namespace, info.name)
        if info.subresource == "token":
            if method != "POST":
                raise errors.method_not_allowed()
            request[VERB] = "CREATE"
            return json_response(self.access.token_request(info.namespace or "", info.name, await body.decoded(request)), 201)
        if method == "GET":
            request[VERB] = "GET"
            obj = self.resources.reads.get(rtype, info.namespace, info.name)
            return self._respond_object(request, rtype, obj)
        if method == "PUT":
            request[VERB] = "UPDATE"
            obj, warnings = await self.resources.writes.update(rtype, info.namespace, info.name, await body.decoded(request),
                                                        subresource=info.subresource, options=params.write_options(query))
            return json_response(obj, 200, warning_headers(warnings))
        if method == "PATCH":
            content_type = body.content_type(request)
            request[VERB] = "APPLY" if content_type == "application/apply-patch+yaml" else "PATCH"
            raw = await body.read(request)
            obj, created, warnings = await self.resources.writes.patch(
                rtype, info.namespace, info.name, raw, content_type=content_type, subresource=info.subresource,
                options=params.write_options(query, patching=True))
            return json_response(obj, 201 if created else 200, warning_headers(warnings))
        if method == "DELETE":
            request[VERB] = "DELETE"
            options = params.delete_options(await body.decoded(request), query)
            obj, gone = await self.resources.deletion.delete(rtype, info.namespace, info.name, options, params.dry_run(query))
            if rtype.is_custom and gone:
                return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                      "details": {"name": info.name, "group": rtype.group, "kind": rtype.plural,
                                                  "uid": obj["metadata"].get("uid")}})
            return json_response(obj)
        raise errors.method_not_allowed()

    async def _scale(self, request: web.BaseRequest, rtype: ResourceType, namespace: str | None,
                     name: str) -> web.Response:
        if request.method == "GET":
            request[VERB] = "GET"
            return json_response(self.resources.reads.get_scale(rtype, namespace, name))
        if request.method == "PUT":
            request[VERB] = "UPDATE"
            document = await body.decoded(request)
            return json_response(await self.resources.writes.update_scale(rtype, namespace, name, document))
        if request.method == "PATCH":
            request[VERB] = "PATCH"
            obj, _, _ = await self.resources.writes.patch(rtype, namespace, name, await body.read(request),
                                                   content_type=body.content_type(request), subresource="scale")
            return json_response(obj)
        raise errors.method_not_allowed()

    @staticmethod
    def _table_include(request: web.BaseRequest) -> str | None:
        return params.table_include(request.headers.get("Accept", ""), request.query)

    def _respond_object(self, request: web.BaseRequest, rtype: ResourceType, obj: Obj) -> web.Response:
        include = self._table_include(request)
        if include is not None:
            return json_response(tables.table(rtype, [obj], include, {"resourceVersion": obj["metadata"]["resourceVersion"]}))
        return json_response(obj)

    # --- the Metrics API (memory only) ------------------------------------------------------

    async def _serve_metrics(self, request: web.BaseRequest, rest: list[str]) -> web.Response:
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        rtype = self.registry.get(metrics_api.GROUP, metrics_api.VERSION, rest[0]) if rest else None
        if rtype is None or len(rest) > 3 or (namespace is not None and not rtype.namespaced):
            raise errors.page_not_found()
        request[RESOURCE] = rtype.group_resource  # pods.metrics.k8s.io, apart from pods in /metrics
        name = rest[1] if len(rest) > 1 else None
        if len(rest) == 3:
            if rest[2] != metrics_api.PUBLISH_SUBRESOURCE or rtype.namespaced:
                raise errors.page_not_found()
            if request.method != "PUT":
                raise errors.method_not_allowed()
            request[VERB] = "UPDATE"
            return json_response(self.metrics_api.publish(name or "", await body.decoded(request)))
        if request.method != "GET" or params.go_bool(request.query, "watch"):
            raise errors.method_not_allowed()
        include = self._table_include(request)
        if name is None:
            request[VERB] = "LIST"
            listed = self.metrics_api.list(rtype, namespace, request.query)
            if include is not None:
                return json_response(tables.table(rtype, listed["items"], include))
            return json_response(listed)
        if rtype.namespaced and namespace is None:
            raise errors.page_not_found()
        request[VERB] = "GET"
        obj = self.metrics_api.get(rtype, namespace, name)
        return json_response(tables.table(rtype, [obj], include) if include is not None else obj)

    # --- list and watch ---------------------------------------------------------------------

    async def _list(self, request: web.BaseRequest, info: RequestInfo) -> web.Response:
        rtype, query = info.rtype, request.query
        matches = params.matcher(query, rtype)
        limit = max(params.int_param(query, "limit") or 0, 0)
        if query.get("resourceVersionMatch") == "Exact" and query.get("resourceVersion") not in (None, str(self.store.committed_rv)):
            raise errors.expired(query.get("resourceVersion", ""))
        items, meta = self.resources.reads.list(rtype, info.namespace, matches, limit, query.get("continue"))
        include = self._table_include(request)
        if include is not None:
            return json_response(tables.table(rtype, items, include, meta))
        return json_response({"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version, "metadata": meta, "items": items})

    async def _watch(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        return await watch.stream(request, info.rtype, info.namespace, self.store, bookmark_interval=self.bookmark_interval)

    # --- exec, attach, portforward: the kubelet's ------------------------------------------

    async def _connect(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        if request.method not in ("GET", "POST"):
            raise errors.method_not_allowed()
        pod = self.resources.reads.get(info.rtype, info.namespace, info.name or "")
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        nodes = self.registry.get("", "v1", "nodes")
        node = self.store.read(nodes.storage_key, "", node_name) if nodes is not None and node_name else None
        return await connect.proxy(request, pod, node, info.subresource or "", self.token)

    # --- logs -------------------------------------------------------------------------------

    async def _log(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        if request.method != "GET":
            raise errors.method_not_allowed()
        rtype = info.rtype
        pod = self.resources.reads.get(rtype, info.namespace, info.name or "")
        uid = pod["metadata"]["uid"]
        key, namespace, name = rtype.storage_key, info.namespace or "", pod["metadata"]["name"]

        def current() -> Obj | None:
            if self._closing:
                return None
            now = self.store.read(key, namespace, name)
            return now if now is not None and now["metadata"].get("uid") == uid else None

        return await logs.respond(request, pod, self.data_dir, current)
