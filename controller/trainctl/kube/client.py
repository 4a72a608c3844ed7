"""The one door to the API server: raw JSON dicts in and out, retries, a rate limit.

Configuration and authentication (kubeconfig, in-cluster service account, token refresh,
client certificates, TLS) come from the ``kubernetes`` package, loaded by
:mod:`trainctl.kube.connect`; the generated model classes
do not, because building them costs about a millisecond per object (see the client-surface
notes) and the controller only ever needs the dicts. Every request goes through
``ApiClient.call_api(..., _preload_content=False)`` and ``json.loads``.

Error policy (Kubernetes API conventions):
- retried with exponential back-off: 429 (honouring ``Retry-After``), 5xx and connection
  errors, including a connection cut before the response;
- AlreadyExists on create and NotFound on delete are not raised (the caller learns which,
  and judges whose object it met);
- everything else is raised as :class:`ApiError` for the caller to decide.

Every request is recorded as ``(verb, group, resource)``: the RBAC test compares that set
with the ClusterRole, so the manifests grant exactly what the code uses.

Streams (watches and ``pods/log?follow``) are plain line readers that another thread can
stop at once: :meth:`Stream.close` shuts the socket down instead of draining it, and
:meth:`KubeClient.close` does that for every stream still open.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, TypeVar

import tenacity
import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from trainctl.kube import connect
from trainctl.kube.ratelimit import TokenBucket
from trainctl.kube.restmapper import PODS, Resource

# (connect, read) seconds for ordinary requests; watches use their own read timeout.
REQUEST_TIMEOUT = (5.0, 30.0)
# How much longer than the server-side watch timeout the client waits for a byte before it
# decides the connection is dead.
WATCH_READ_MARGIN = 15.0


class ApiError(Exception):
    """A non-2xx answer (``code`` > 0) or a connection failure (``code`` == 0)."""

    def __init__(self, code: int, reason: str, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(f"{code} {reason}: {message}" if code else message)
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.code == 0 or self.code == 429 or self.code >= 500

    @classmethod
    def from_api_exception(cls, exc: ApiException) -> "ApiError":
        reason, message = exc.reason or "", ""
        try:
            status = json.loads(exc.body) if exc.body else {}
            reason = status.get("reason") or reason
            message = status.get("message") or ""
        except (ValueError, TypeError, AttributeError):
            message = str(exc.body or "")[:200]
        retry_after = None
        headers = exc.headers or {}
        if headers.get("Retry-After"):
            try:
                retry_after = float(headers["Retry-After"])
            except ValueError:
                pass
        return cls(exc.status or 0, reason, message, retry_after)


def _wait(retry_state: tenacity.RetryCallState) -> float:
    """Retry-After when the server gave one (capped), else exponential back-off with jitter."""
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    if isinstance(exc, ApiError) and exc.retry_after is not None:
        return min(exc.retry_after, 10.0)
    return tenacity.wait_exponential_jitter(multiplier=0.05, max=5.0)(retry_state)


@dataclass
class Created:
    """What a create returned: the stored object, or None when it already existed."""

    object: Optional[dict[str, Any]]

    @property
    def existed(self) -> bool:
        return self.object is None


class KubeClient:
    """A thread-safe JSON client for the resources in :mod:`trainctl.kube.restmapper`."""

    def __init__(
        self,
        configuration: k8s_client.Configuration,
        *,
        qps: float = 100.0,
        burst: int = 200,
        max_attempts: int = 8,
        pool_size: int = 64,
        on_response: Optional[Callable[[str, str], None]] = None,
        api_client: Optional[k8s_client.ApiClient] = None,
        component: Optional[str] = None,
    ) -> None:
        """``api_client``, when given, is used as it is (its own pool and retry settings).
        ``component`` names this program in its User-Agent, which the API server records as the
        field manager of its writes (as client-go sends its binary's name)."""
        if api_client is None:
            configuration.retries = False  # tenacity decides, urllib3 must not retry on its own
            configuration.connection_pool_maxsize = pool_size
            api_client = k8s_client.ApiClient(configuration)
        if component:
            api_client.user_agent = f"{component}/trainctl"
        self.configuration = configuration
        self._api = api_client
        self._limiter = TokenBucket(qps, burst)
        self._max_attempts = max_attempts
        self.on_response = on_response  # (verb, code) after every answer, for metrics
        self._calls: set[tuple[str, str, str]] = set()
        self._calls_lock = threading.Lock()
        self._streams: set[Stream] = set()
        self._closed = False

    @classmethod
    def for_api_client(cls, api_client: k8s_client.ApiClient, **kwargs: Any) -> "KubeClient":
        """A client on an already configured ``kubernetes`` ApiClient."""
        return cls(api_client.configuration, api_client=api_client, **kwargs)

    @property
    def host(self) -> str:
        return str(self.configuration.host).rstrip("/")

    def close(self) -> None:
        """End every open stream (their readers see the stream end) and release the pool."""
        self._closed = True
        for stream in list(self._streams):
            stream.close()
        self._api.rest_client.pool_manager.clear()

    @classmethod
    def from_kubeconfig(cls, kubeconfig: Optional[str] = None, context: Optional[str] = None, **kwargs: Any) -> "KubeClient":
        """A client on the cluster :func:`~trainctl.kube.connect.connect` picks (its precedence rule)."""
        return cls(connect.load_configuration(kubeconfig, context=context), **kwargs)

    # --- what RBAC must allow -------------------------------------------------------------
    @property
    def calls(self) -> set[tuple[str, str, str]]:
        """Every (verb, API group, resource[/subresource]) this client has requested."""
        with self._calls_lock:
            return set(self._calls)

    def _record(self, verb: str, resource: Resource, subresource: Optional[str]) -> None:
        name = f"{resource.plural}/{subresource}" if subresource else resource.plural
        with self._calls_lock:
            self._calls.add((verb, resource.group, name))

    # --- the wire ---------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        query: Optional[list[tuple[str, Any]]] = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, Optional[float]] = REQUEST_TIMEOUT,
    ) -> urllib3.BaseHTTPResponse:
        """One HTTP exchange, no retries. Returns the unread response (2xx only)."""
        self._limiter.acquire()
        try:
            response: urllib3.BaseHTTPResponse = self._api.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=timeout,
            )
        except ApiException as exc:
            error = ApiError.from_api_exception(exc)
            self._observe(verb, error.code)
            raise error from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._observe(verb, 0)
            raise ApiError(0, "ConnectionError", f"{type(exc).__name__}: {exc}") from None
        self._observe(verb, response.status)
        return response

    def _observe(self, verb: str, code: int) -> None:
        if self.on_response is not None:
            self.on_response(verb, str(code) if code else "error")

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """A request with retries whose JSON body is returned."""

        def once() -> dict[str, Any]:
            response = self._request(method, path, **kwargs)
            try:
                data = response.data
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise ApiError(0, "ConnectionError", f"reading response: {exc}") from None
            finally:
                response.release_conn()
            return json.loads(data) if data else {}

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._max_attempts),
            wait=_wait,
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, ApiError) and e.retryable),
            reraise=True,
        )
        return retrying(once)

    # --- verbs ------------------------------------------------------------------------------
    def get(self, resource: Resource, namespace: Optional[str], name: str, subresource: Optional[str] = None) -> dict[str, Any]:
        self._record("get", resource, subresource)
        return self._json("GET", resource.path(namespace, name, subresource), verb="get")

    def get_or_none(self, resource: Resource, namespace: Optional[str], name: str) -> Optional[dict[str, Any]]:
        try:
            return self.get(resource, namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def list(
        self,
        resource: Resource,
        namespace: Optional[str] = None,
        *,
        label_selector: Optional[str] = None,
        field_selector: Optional[str] = None,
        page_size: int = 500,
    ) -> tuple[list[dict[str, Any]], str]:
        """All objects (paginated) and the list's resourceVersion, the point to watch from."""
        self._record("list", resource, None)
        items: list[dict[str, Any]] = []
        token = None
        while True:
            query: list[tuple[str, Any]] = [("limit", page_size), *_selectors(label_selector, field_selector)]
            if token:
                query.append(("continue", token))
            page = self._json("GET", resource.path(namespace), verb="list", query=query)
            kind = resource.kind
            api_version = resource.api_version
            for item in page.get("items") or ():
                # Items of a list omit their type; the cache keeps whole objects.
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", api_version)
                items.append(item)
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    def watch(
        self,
        resource: Resource,
        namespace: Optional[str],
        resource_version: str,
        *,
        label_selector: Optional[str] = None,
        field_selector: Optional[str] = None,
        timeout_seconds: int = 300,
    ) -> "WatchStream":
        """Open a watch from ``resource_version``, bookmarks included.

        The server closes the stream after ``timeout_seconds``; the client gives up on a
        silent connection a little later, so a dead peer cannot hang the informer.
        """
        self._record("watch", resource, None)
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        query.extend(_selectors(label_selector, field_selector))
        response = self._request(
            "GET",
            resource.path(namespace),
            verb="watch",
            query=query,
            timeout=(REQUEST_TIMEOUT[0], timeout_seconds + WATCH_READ_MARGIN),
        )
        return self._open(WatchStream(response))

    def log(
        self,
        namespace: str,
        name: str,
        *,
        container: Optional[str] = None,
        follow: bool = False,
        previous: bool = False,
        timestamps: bool = False,
    ) -> "LogStream":
        """A pod's log as a stream of lines; with ``follow`` it ends when the container does.

        ``previous`` reads the container's last terminated instance; ``timestamps`` prefixes
        each line with the RFC 3339 time the runtime received it.
        """
        self._record("get", PODS, "log")
        query: list[tuple[str, Any]] = []
        if container:
            query.append(("container", container))
        for flag, value in (("follow", follow), ("previous", previous), ("timestamps", timestamps)):
            if value:
                query.append((flag, "true"))
        response = self._request(
            "GET",
            PODS.path(namespace, name, "log"),
            verb="get",
            query=query,
            timeout=(REQUEST_TIMEOUT[0], None) if follow else REQUEST_TIMEOUT,
        )
        return self._open(LogStream(response))

    def _open(self, stream: "StreamT") -> "StreamT":
        self._streams.add(stream)
        stream.on_close = self._streams.discard
        if self._closed:
            stream.close()
        return stream

    def create(self, resource: Resource, obj: dict[str, Any], subresource: Optional[str] = None) -> Created:
        """POST; an AlreadyExists answer is not raised (``Created.existed``): whether the object
        there is the caller's own is for the caller to judge.

        With ``subresource`` (``binding``, ``eviction``) the POST goes to the named object's
        subresource, as client-go's ``Bind`` does.
        """
        self._record("create", resource, subresource)
        meta = obj.get("metadata") or {}
        path = resource.path(meta.get("namespace"), meta["name"], subresource) if subresource else resource.path(meta.get("namespace"))
        try:
            return Created(self._json("POST", path, verb="create", body=obj))
        except ApiError as exc:
            if exc.code == 409 and exc.reason == "AlreadyExists":
                return Created(None)
            raise

    def replace(self, resource: Resource, obj: dict[str, Any], subresource: Optional[str] = None) -> dict[str, Any]:
        """PUT the whole object (its resourceVersion makes it conditional)."""
        self._record("update", resource, subresource)
        meta = obj.get("metadata") or {}
        return self._json("PUT", resource.path(meta.get("namespace"), meta["name"], subresource), verb="update", body=obj)

    def patch(
        self,
        resource: Resource,
        namespace: Optional[str],
        name: str,
        patch: dict[str, Any],
        subresource: Optional[str] = None,
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386), for writers that own only some fields."""
        self._record("patch", resource, subresource)
        return self._json(
            "PATCH",
            resource.path(namespace, name, subresource),
            verb="patch",
            body=patch,
            content_type="application/merge-patch+json",
        )

    def delete(
        self,
        resource: Resource,
        namespace: Optional[str],
        name: str,
        *,
        uid: Optional[str] = None,
        resource_version: Optional[str] = None,
        grace_period_seconds: Optional[int] = None,
        propagation: str = "Background",
    ) -> bool:
        """DELETE; False when the object was already gone (or replaced by another uid).

        With ``resource_version``, an object that changed since raises the 409 ``ApiError``:
        the caller decided on a stale version and should look again.
        """
        self._record("delete", resource, None)
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        try:
            self._json("DELETE", resource.path(namespace, name), verb="delete", body=options)
            return True
        except ApiError as exc:
            if exc.code == 404:
                return False
            if exc.code == 409 and uid and "UID in precondition" in (exc.message or ""):
                return False  # the uid precondition failed: the object we meant is gone
            raise

    def group_version_served(self, group: str, version: str) -> bool:
        """Discovery: does the server serve ``group/version`` (e.g. a PodGroup CRD)?"""
        try:
            self._json("GET", f"/apis/{group}/{version}", verb="discovery")
            return True
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise


class Stream:
    """The lines of one streamed response; :meth:`close` from another thread unblocks a reader.

    A dropped connection is raised as :class:`ApiError` (code 0) unless the stream was
    closed on purpose, in which case the reader simply sees the end.
    """

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response
        self._closed = False
        self.on_close: Optional[Callable[["Stream"], None]] = None

    def lines(self) -> Iterator[bytes]:
        buffer = b""
        try:
            for chunk in self._response.stream(amt=None, decode_content=True):
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                yield from complete
            if buffer:
                yield buffer
        except (urllib3.exceptions.HTTPError, OSError, AttributeError) as exc:
            if self._closed:
                return
            raise ApiError(0, "ConnectionError", f"stream: {type(exc).__name__}: {exc}") from None
        finally:
            self._response.release_conn()
            if self.on_close is not None:
                self.on_close(self)

    def close(self) -> None:
        """Stop the stream from another thread (the reader returns quietly)."""
        self._closed = True
        try:
            self._response.shutdown()
        except (OSError, AttributeError, ValueError, RuntimeError):
            pass  # already finished or released: nothing left to unblock
        if self.on_close is not None:
            self.on_close(self)


StreamT = TypeVar("StreamT", bound=Stream)


class WatchStream(Stream):
    """The events (dicts ``{type, object}``) of one open watch.

    A body cut mid-event is raised as :class:`ApiError` (code 0), like a dropped connection;
    the informer re-watches from its last resourceVersion.
    """

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for line in self.lines():
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except ValueError as exc:
                raise ApiError(0, "ConnectionError", f"watch stream cut mid-event: {exc}") from None


class LogStream(Stream):
    """The lines of a container's log, decoded (blank lines kept)."""

    def __iter__(self) -> Iterator[str]:
        for line in self.lines():
            yield line.decode("utf-8", errors="replace")


def _selectors(label_selector: Optional[str], field_selector: Optional[str]) -> list[tuple[str, Any]]:
    query: list[tuple[str, Any]] = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query
