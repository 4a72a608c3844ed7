"""The HTTP face of the server: every request's authentication, errors and metrics, and the
paths that are not resources (health, ``/version``, ``/metrics``, discovery, OpenAPI, the
in-memory Metrics API).

A resource path is parsed into a target and served by its route (``routes``); everything
about objects is decided in ``storage``. This module turns their results (or ``ApiError``)
into responses real clients accept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from trainctl.cluster.apiserver.apimachinery import errors, request_limits
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry
from trainctl.cluster.apiserver.auth import access, pki, tokens
from trainctl.cluster.apiserver.serving import body, discovery, health, openapi, params, routes, tables
from trainctl.cluster.apiserver.serving.metrics import Metrics
from trainctl.cluster.apiserver.serving.responses import error_response, json_response
from trainctl.cluster.apiserver.serving.routes import RESOURCE, USER, VERB
from trainctl.cluster.apiserver.storage import metrics_api
from trainctl.cluster.apiserver.storage.resources import Resources
from trainctl.cluster.apiserver.storage.store import Store

Obj = dict[str, Any]
log = logging.getLogger(__name__)

STATE_FILE = "state.db"
# An exec's command is its query string: kube-apiserver (Go's 1 MiB of request head) takes
# commands of hundreds of kilobytes where aiohttp's default request line stops at 8 KiB.
MAX_REQUEST_LINE_BYTES = 1024 * 1024


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
        self.resources.writes.admission.guards.extend(self.access.guards)
        self.handlers = routes.Handlers(self.resources, self.access, data_dir,
                                       pki.kubelet_client_context(data_dir / "pki"), bookmark_interval, lambda: self._closing)
        self.metrics = Metrics()
        self.openapi = openapi.Documents(self.registry)  # hook: OpenAPI documents (openapi)
        self.address = ""
        # aiohttp's low-level server: no router or middleware chain, a third less work per request.
        self.http = web.Server(self._handle, request_factory=self._make_request, handler_cancellation=True,
                               max_line_size=MAX_REQUEST_LINE_BYTES)

    def _make_request(self, message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
        return web.BaseRequest(message, payload, protocol, writer, task, asyncio.get_running_loop(),
                               client_max_size=request_limits.MAX_REQUEST_BYTES)

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
                transport = request.transport
                peer = transport.get_extra_info("peercert") if transport is not None else None
                request[USER] = self.access.admit(request.method, request.path, request.query, request.headers, peer)
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
        parts = [p for p in path.split("/") if p]
        if parts and parts[0] in health.ENDPOINTS:
            checks = {"ping": lambda: "", "log": lambda: "", "etcd": lambda: self.store.write_error}
            return health.answer(parts[0], parts[1:], request.query, checks, request.query.getall("exclude", []))
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
        if not parts or parts[0] not in ("api", "apis"):
            raise errors.page_not_found()
        if request.method == "GET":
            discovered = self._discovery(request, parts)
            if discovered is not None:
                return discovered
        if parts[1:3] == [metrics_api.GROUP, metrics_api.VERSION]:
            return await self._serve_metrics(request, parts[3:])
        return await self.handlers.serve(request, routes.parse(self.registry, parts))

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
        include = routes.table_include(request)
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
