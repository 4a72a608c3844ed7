"""A small raw-dict REST client for the kubelet.

The kubelet needs a dozen verbs on a handful of core resources, and it needs them as plain
JSON dicts with watches as streams of lines. The ``kubernetes`` package gives us the
kubeconfig loading and the TLS/auth-aware urllib3 pool; this module adds only the URL
building and the ``metav1.Status`` error mapping on top.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any, Optional
from urllib.parse import quote, urlencode

from kubernetes import config as kube_config
from kubernetes.client import Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTClientObject

Obj = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer, carrying the HTTP code and the Status reason."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message

    @classmethod
    def from_exception(cls, exc: ApiException) -> "ApiError":
        reason, message = exc.reason or "", str(exc.body or "")
        try:
            status = json.loads(exc.body or "{}")
            reason = status.get("reason") or reason
            message = status.get("message") or message
        except (ValueError, AttributeError):
            pass
        return cls(int(exc.status or 0), reason, message)


def resource_path(resource: str, namespace: Optional[str] = None, name: Optional[str] = None,
                  subresource: Optional[str] = None, group_version: str = "v1") -> str:
    """``/api/v1/namespaces/ns/pods/name/status`` and friends."""
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    parts = [root]
    if namespace is not None:
        parts.append(f"namespaces/{quote(namespace)}")
    parts.append(resource)
    if name is not None:
        parts.append(quote(name))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


class KubeClient:
    """Plain-dict access to one API server described by a kubeconfig."""

    def __init__(self, kubeconfig: str, request_timeout: float = 30.0) -> None:
        configuration = Configuration()
        kube_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        self.host = configuration.host.rstrip("/")
        self._auth = configuration.get_api_key_with_prefix("authorization")
        self._rest = RESTClientObject(configuration, pools_size=8)
        self._timeout = request_timeout
        self._watches: set[Any] = set()
        self._closed = False

    def _headers(self, content_type: str = "application/json") -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if self._auth:
            headers["Authorization"] = self._auth
        return headers

    def request(self, method: str, path: str, body: Any = None, query: Optional[dict[str, Any]] = None,
                content_type: str = "application/json") -> Obj:
        url = self.host + path
        if query and method in ("GET", "HEAD"):
            url += "?" + urlencode(query)
            query = None
        try:
            response = self._rest.request(method, url, query_params=query, headers=self._headers(content_type),
                                          body=body, _preload_content=False, _request_timeout=self._timeout)
        except ApiException as exc:
            raise ApiError.from_exception(exc) from None
        data = response.data
        return json.loads(data) if data else {}

    def get(self, path: str, **query: Any) -> Obj:
        return self.request("GET", path, query=query or None)

    def create(self, path: str, body: Obj) -> Obj:
        return self.request("POST", path, body=body)

    def merge_patch(self, path: str, patch: Obj) -> Obj:
        return self.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    def replace(self, path: str, body: Obj) -> Obj:
        return self.request("PUT", path, body=body)

    def delete(self, path: str, grace_period_seconds: Optional[int] = None, uid: Optional[str] = None) -> Obj:
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if uid:
            body["preconditions"] = {"uid": uid}
        return self.request("DELETE", path, body=body)

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
              **params: str) -> Iterator[Obj]:
        """Yield watch events (``{"type": ..., "object": ...}``) until the server closes the stream."""
        query = {**params, "watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(timeout_seconds)}
        url = f"{self.host}{path}?{urlencode(query)}"
        try:
            response = self._rest.request("GET", url, headers=self._headers(), _preload_content=False,
                                          _request_timeout=(10, timeout_seconds + 30))
        except ApiException as exc:
            raise ApiError.from_exception(exc) from None
        self._watches.add(response)
        if self._closed:
            _shutdown(response)
        try:
            pending = b""
            for chunk in response.stream(None, decode_content=False):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
            if pending.strip():
                yield json.loads(pending)
        finally:
            self._watches.discard(response)
            response.release_conn()

    def close(self) -> None:
        """End every open watch stream (their readers see the stream end) and the pool."""
        self._closed = True
        for response in list(self._watches):
            _shutdown(response)
        self._rest.pool_manager.clear()


def _shutdown(response: Any) -> None:
    """Unblock a reader of ``response``; it may just have finished on its own."""
    with contextlib.suppress(RuntimeError, ValueError, OSError):
        response.shutdown()
