"""Failures as ``metav1.Status`` bodies.

Every client (kubectl, the Python client, the SDK) prints ``message`` verbatim and branches
on ``code`` and ``reason``, so every refusal the server makes is one ``ApiError`` raised
anywhere in a handler and rendered once, by the HTTP layer. ``details`` is there exactly when
kube-apiserver sends it, even empty (``"details": {}`` on a 404 for a path nobody serves):
clients read it without checking (``kubectl debug`` dereferences it on a 404).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Cause:
    """One entry of ``details.causes``: a field and what is wrong with it."""

    field: str
    reason: str  # FieldValueRequired, FieldValueInvalid, ...
    message: str

    def to_wire(self) -> dict[str, str]:
        # Empty members are left out, as the Go type's omitempty leaves them out.
        wire = {"reason": self.reason, "message": self.message, "field": self.field}
        return {key: value for key, value in wire.items() if value}


@dataclass
class ApiError(Exception):
    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None
    causes: list[Cause] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None or self.causes:
            # Empty members are left out (the Go type's omitempty: no "group" for the core group).
            details = {key: value for key, value in (self.details or {}).items() if value not in ("", None)}
            if self.causes:
                details["causes"] = [c.to_wire() for c in self.causes]
            body["details"] = details
        body["code"] = self.code  # after details, in the Go type's field order
        return body


def _qualified(kind_plural: str, group: str) -> str:
    return f"{kind_plural}.{group}" if group else kind_plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(plural, group)} "{name}" not found',
        {"name": name, "group": group, "kind": plural},
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(plural, group)} "{name}" already exists',
        {"name": name, "group": group, "kind": plural},
    )


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        {"name": name, "group": group, "kind": plural},
    )


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    listed = ", ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes)
    if len(causes) > 1:
        listed = f"[{listed}]"
    return ApiError(
        422,
        "Invalid",
        f'{_qualified(kind, group)} "{name}" is invalid: {listed}',
        {"name": name, "group": group, "kind": kind},
        causes,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(message: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", message)


def expired(rv: int | str) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {rv}")


def internal(message: str, code: int = 500) -> ApiError:
    """kube-apiserver's ``NewInternalError``: the cause repeated as the one cause."""
    return ApiError(code, "InternalError", message, {}, [Cause("", "", message)])


def forbidden(plural: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(403, "Forbidden", f'{_qualified(plural, group)} "{name}" is forbidden: {why}',
                    {"name": name, "group": group, "kind": plural})


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def page_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def too_large_resource_version(requested: int, current: int) -> ApiError:
    """A watch from a version the server has not reached (kube-apiserver waits a few seconds first)."""
    return ApiError(504, "Timeout", f"Too large resource version: {requested}, current: {current}",
                    {"retryAfterSeconds": 1},
                    [Cause("", "ResourceVersionTooLarge", "Too large resource version")])
