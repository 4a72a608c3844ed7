"""The HTTP face of the server: routing, authentication, query parameters, content
negotiation (JSON or Table), watch streams, log streams and ``/metrics``.

Everything about objects is decided in ``resources``; this module translates Kubernetes
REST paths and parameters into those calls and their results (or ``ApiError``) back into
responses real clients accept.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import web

from . import discovery, errors, logs, openapi, protobuf, selectors, tables
from .metrics import Metrics
from .registry import Registry, ResourceType
from .resources import Resources
from .store import Event, Store

Obj = dict[str, Any]
log = logging.getLogger(__name__)

JSON = "application/json"
_PUBLIC_PATHS = {"/healthz", "/readyz", "/livez", "/version"}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
MAX_BODY_BYTES = 16 * 1024 * 1024  # large CRDs exceed aiohttp's default of 1 MiB


def go_bool(params: Any, name: str, default: bool = False) -> bool:
    """A boolean query parameter, parsed like Go's strconv.ParseBool."""
    value = params.get(name)
    if value is None or value == "":
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.bad_request(f'invalid boolean value "{value}" for parameter {name}')


def int_param(params: Any, name: str) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'invalid value "{value}" for parameter {name}: must be an integer') from None


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None,
                  content_type: str = JSON) -> web.Response:
    all_headers = {"Content-Type": content_type}
    if headers:
        all_headers.update(headers)
    return web.Response(body=orjson.dumps(body), status=status, headers=all_headers)


def error_response(exc: errors.ApiError) -> web.Response:
    return web.Response(body=orjson.dumps(exc.status()), status=exc.code, content_type=JSON, headers=exc.headers or None)


def _warning_headers(warnings: list[str]) -> dict[str, str] | None:
    if not warnings:
        return None
    # aiohttp joins repeated keys poorly; one header with comma-separated values is valid HTTP.
    return {"Warning": ", ".join(f'299 - "{w}"' for w in warnings)}


@dataclass
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
        self._authorization = f"Bearer {token}".encode()
        self._closing = False
        self.store = Store(data_dir / "state.db", window=watch_window, fsync=fsync)
        self.registry = Registry()
        self.resources = Resources(self.store, self.registry, service_cidr)
        self.metrics = Metrics()
        self.openapi = openapi.Documents(self.registry)  # hook: OpenAPI documents (openapi)
        self.bookmark_interval = bookmark_interval
        self.address = ""
        # aiohttp's low-level server: no router or middleware chain, a third less work per request.
        self.http = web.Server(self._handle, request_factory=self._make_request, handler_cancellation=True)

    def _make_request(self, message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
        return web.BaseRequest(message, payload, protocol, writer, task, asyncio.get_running_loop(),
                               client_max_size=MAX_BODY_BYTES)

    async def start(self) -> None:
        await self.resources.bootstrap()

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
        request["verb"] = request.method
        request["resource"] = ""
        try:
            if request.path not in _PUBLIC_PATHS:
                supplied = request.headers.get("Authorization", "")
                if not hmac.compare_digest(supplied.encode(), self._authorization):
                    raise errors.unauthorized()
            response = await self._dispatch(request)
        except errors.ApiError as exc:
            response = error_response(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path)
            response = error_response(errors.ApiError(500, "InternalError", f"Internal error occurred: {exc}"))
        if request["resource"]:
            self.metrics.observe(request["verb"], request["resource"], response.status, time.perf_counter() - started)
        return response

    # --- routing ----------------------------------------------------------------------------

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/version":
            return json_response(discovery.KUBERNETES_VERSION)
        if path == "/metrics":
            for rtype in {t.storage_key: t for t in self.registry}.values():
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
        rtype, params, method = info.rtype, request.query, request.method
        request["resource"] = rtype.plural
        if info.name is None:
            if method == "GET":
                watching = go_bool(params, "watch")
                request["verb"] = "WATCH" if watching else "LIST"
                return await (self._watch(request, info) if watching else self._list(request, info))
            if method == "POST":
                request["verb"] = "CREATE"
                if rtype.namespaced and info.namespace is None:
                    raise errors.method_not_allowed()
                body = await self._json_body(request)
                obj, warnings = await self.resources.create(
                    rtype, info.namespace, body, self._field_validation(params), self._dry_run(params))
                return json_response(obj, 201, _warning_headers(warnings))
            if method == "DELETE":
                request["verb"] = "DELETECOLLECTION"
                options = await self._delete_options(request)
                deleted = await self.resources.delete_collection(rtype, info.namespace, self._matcher(params, rtype), options)
                kind = f"{rtype.kind}List"
                return json_response({"kind": kind, "apiVersion": rtype.api_version,
                                      "metadata": {"resourceVersion": str(self.store.rv)}, "items": deleted})
            raise errors.method_not_allowed()
        if rtype.namespaced and info.namespace is None:
            raise errors.page_not_found()
        if info.subresource == "log":
            request["verb"] = "CONNECT"
            return await self._log(request, info)
        if info.subresource in ("binding", "eviction"):
            if method != "POST":
                raise errors.method_not_allowed()
            request["verb"] = "CREATE"
            body = await self._json_body(request)
            if info.subresource == "binding":
                await self.resources.bind(rtype, info.namespace, info.name, body)
            else:
                options = body.get("deleteOptions") if isinstance(body, dict) else None
                await self.resources.delete(rtype, info.namespace, info.name, options if isinstance(options, dict) else {})
            return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)
        if info.subresource == "scale":
            return await self._scale(request, info)
        if method == "GET":
            request["verb"] = "GET"
            obj = self.resources.get(rtype, info.namespace, info.name)
            return self._respond_object(request, rtype, obj)
        if method == "PUT":
            request["verb"] = "UPDATE"
            body = await self._json_body(request)
            obj, warnings = await self.resources.update(rtype, info.namespace, info.name, body, info.subresource,
                                                        self._field_validation(params), self._dry_run(params))
            return json_response(obj, 200, _warning_headers(warnings))
        if method == "PATCH":
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            request["verb"] = "APPLY" if content_type == "application/apply-patch+yaml" else "PATCH"
            raw = await request.read()
            obj, created, warnings = await self.resources.patch(
                rtype, info.namespace, info.name, raw, content_type, info.subresource,
                self._field_validation(params), self._dry_run(params), go_bool(params, "force"))
            return json_response(obj, 201 if created else 200, _warning_headers(warnings))
        if method == "DELETE":
            request["verb"] = "DELETE"
            options = await self._delete_options(request)
            obj, gone = await self.resources.delete(rtype, info.namespace, info.name, options, self._dry_run(params))
            if rtype.is_custom and gone:
                return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                      "details": {"name": info.name, "group": rtype.group, "kind": rtype.plural,
                                                  "uid": obj["metadata"].get("uid")}})
            return json_response(obj)
        raise errors.method_not_allowed()

    async def _scale(self, request: web.BaseRequest, info: RequestInfo) -> web.Response:
        rtype = info.rtype
        if request.method == "GET":
            request["verb"] = "GET"
            return json_response(self.resources.get_scale(rtype, info.namespace, info.name))
        if request.method == "PUT":
            request["verb"] = "UPDATE"
            body = await self._json_body(request)
            return json_response(await self.resources.update_scale(rtype, info.namespace, info.name, body))
        if request.method == "PATCH":
            request["verb"] = "PATCH"
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            obj, _, _ = await self.resources.patch(rtype, info.namespace, info.name, await request.read(),
                                                   content_type, "scale")
            return json_response(obj)
        raise errors.method_not_allowed()

    # --- request parsing --------------------------------------------------------------------

    async def _json_body(self, request: web.BaseRequest) -> Any:
        """The request body as JSON data (JSON, YAML, or protobuf for the kinds kubectl sends so)."""
        raw = await request.read()
        content_type = request.headers.get("Content-Type", JSON).split(";")[0].strip() or JSON
        if content_type == protobuf.CONTENT_TYPE:
            return protobuf.decode(raw)
        if content_type not in (JSON, "application/yaml", "*/*"):
            raise errors.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types include: {JSON}, "
                f"application/yaml, {protobuf.CONTENT_TYPE}")
        if not raw.strip():
            return None
        try:
            if content_type == "application/yaml":
                return yaml.safe_load(raw)
            return orjson.loads(raw)
        except (ValueError, yaml.YAMLError) as exc:
            message = str(exc).splitlines()[0]
            raise errors.bad_request(f"the body of the request was in an unknown format - {message}") from None

    async def _delete_options(self, request: web.BaseRequest) -> Obj:
        body = await self._json_body(request)
        options: Obj = dict(body) if isinstance(body, dict) else {}
        params = request.query
        grace = int_param(params, "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if params.get("propagationPolicy"):
            options["propagationPolicy"] = params["propagationPolicy"]
        if params.get("orphanDependents"):
            options["orphanDependents"] = go_bool(params, "orphanDependents")
        return options

    @staticmethod
    def _field_validation(params: Any) -> str:
        value = params.get("fieldValidation") or "Warn"
        if value not in ("Ignore", "Warn", "Strict"):
            raise errors.bad_request(f'fieldValidation must be one of "Ignore", "Warn" or "Strict", got "{value}"')
        return value

    @staticmethod
    def _dry_run(params: Any) -> bool:
        values = params.getall("dryRun", [])
        if any(v not in ("All", "") for v in values):
            raise errors.bad_request('dryRun must be "All"')
        return "All" in values

    @staticmethod
    def _matcher(params: Any, rtype: ResourceType) -> Callable[[Obj], bool]:
        return selectors.combine(
            selectors.parse_label_selector(params.get("labelSelector")),
            selectors.parse_field_selector(params.get("fieldSelector"), rtype.plural, rtype.is_custom),
        )

    @staticmethod
    def _table_include(request: web.BaseRequest) -> str | None:
        """The includeObject policy when the client asked for a Table, else None."""
        accept = request.headers.get("Accept", "")
        if "as=Table" not in accept:
            return None
        include = request.query.get("includeObject") or "Metadata"
        if include not in ("None", "Metadata", "Object"):
            raise errors.bad_request(f'includeObject must be one of "None", "Metadata", "Object", got "{include}"')
        return include

    def _respond_object(self, request: web.BaseRequest, rtype: ResourceType, obj: Obj) -> web.Response:
        include = self._table_include(request)
        if include is not None:
            return json_response(tables.table(rtype, [obj], include, {"resourceVersion": obj["metadata"]["resourceVersion"]}))
        return json_response(obj)

    # --- list and watch ---------------------------------------------------------------------

    async def _list(self, request: web.BaseRequest, info: RequestInfo) -> web.Response:
        rtype, params = info.rtype, request.query
        matches = self._matcher(params, rtype)
        limit = max(int_param(params, "limit") or 0, 0)
        if params.get("resourceVersionMatch") == "Exact" and params.get("resourceVersion") not in (None, str(self.store.rv)):
            raise errors.expired(params.get("resourceVersion", ""))
        items, meta = self.resources.list(rtype, info.namespace, matches, limit, params.get("continue"))
        include = self._table_include(request)
        if include is not None:
            return json_response(tables.table(rtype, items, include, meta))
        return json_response({"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version, "metadata": meta, "items": items})

    def _event_line(self, rtype: ResourceType, event: Event, include: str | None) -> bytes:
        obj = event.obj
        if obj.get("apiVersion") != rtype.api_version:
            obj = {**obj, "apiVersion": rtype.api_version}
        if include is not None:
            obj = tables.table(rtype, [obj], include, {"resourceVersion": obj["metadata"]["resourceVersion"]})
        return orjson.dumps({"type": event.type, "object": obj}) + b"\n"

    async def _watch(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        rtype, params = info.rtype, request.query
        matches = self._matcher(params, rtype)
        include = self._table_include(request)
        bookmarks = go_bool(params, "allowWatchBookmarks")
        timeout = int_param(params, "timeoutSeconds")
        rv_text = params.get("resourceVersion", "")
        try:
            since = None if rv_text in ("", "0") else int(rv_text)
        except ValueError:
            raise errors.bad_request(f'invalid resource version "{rv_text}"') from None
        response = web.StreamResponse(headers={"Content-Type": JSON, "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        try:
            watcher = self.store.watch(rtype.storage_key, info.namespace, matches, since)
        except errors.ApiError as exc:
            await response.prepare(request)
            await response.write(orjson.dumps({"type": "ERROR", "object": exc.status()}) + b"\n")
            await response.write_eof()
            return response
        deadline = time.monotonic() + timeout if timeout and timeout > 0 else None
        try:
            await response.prepare(request)
            if since is None:
                for obj in self.store.list(rtype.storage_key, info.namespace):
                    if matches(obj):
                        line = self._event_line(rtype, Event(0, "ADDED", rtype.storage_key, obj, None), include)
                        await response.write(line)
                if bookmarks and go_bool(params, "sendInitialEvents"):
                    await response.write(self._bookmark(rtype, watcher.since, initial_end=True))
            while True:
                wait = self.bookmark_interval
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        break
                try:
                    event = await asyncio.wait_for(watcher.queue.get(), wait)
                except asyncio.TimeoutError:
                    if bookmarks and (deadline is None or deadline - time.monotonic() > 0.001):
                        await response.write(self._bookmark(rtype, self.store.published_rv))
                    continue
                if event is None:
                    break  # the watcher fell too far behind, or the server is stopping
                await response.write(self._event_line(rtype, event, include))
            if bookmarks:
                await response.write(self._bookmark(rtype, self.store.published_rv))
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away
        finally:
            self.store.stop_watch(watcher)
        return response

    @staticmethod
    def _bookmark(rtype: ResourceType, rv: int, initial_end: bool = False) -> bytes:
        meta: Obj = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return orjson.dumps({"type": "BOOKMARK", "object": {"kind": rtype.kind, "apiVersion": rtype.api_version,
                                                            "metadata": meta}}) + b"\n"

    # --- logs -------------------------------------------------------------------------------

    async def _log(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        if request.method != "GET":
            raise errors.method_not_allowed()
        rtype, params = info.rtype, request.query
        pod = self.resources.get(rtype, info.namespace, info.name or "")
        options = logs.LogOptions(
            container=logs.choose_container(pod, params.get("container", "")),
            previous=go_bool(params, "previous"),
            follow=go_bool(params, "follow"),
            timestamps=go_bool(params, "timestamps"),
            tail_lines=int_param(params, "tailLines"),
            since=logs.since_from(int_param(params, "sinceSeconds"), params.get("sinceTime")),
            limit_bytes=int_param(params, "limitBytes"),
        )
        uid = pod["metadata"]["uid"]
        key, namespace, name = rtype.storage_key, info.namespace or "", pod["metadata"]["name"]

        def current() -> Obj | None:
            if self._closing:
                return None
            now = self.store.get(key, namespace, name)
            return now if now is not None and now["metadata"].get("uid") == uid else None

        chunks = logs.stream(self.data_dir, pod, options, current)
        first = await anext(chunks, None)  # errors (container not started ...) become a Status
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        if options.follow:
            response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            if first is not None:
                await response.write(first)
                async for chunk in chunks:
                    await response.write(chunk)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away
        return response
