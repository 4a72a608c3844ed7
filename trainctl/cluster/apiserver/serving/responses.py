"""HTTP responses real clients accept: JSON bodies, ``metav1.Status`` errors and
``Warning`` headers.

A body ends with a newline, as kube-apiserver's JSON encoder writes it: the Python client's
``create_from_yaml`` quotes error bodies verbatim in its messages."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from trainctl.cluster.apiserver.apimachinery import errors

JSON = "application/json"


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None,
                  content_type: str = JSON) -> web.Response:
    all_headers = {"Content-Type": content_type}
    if headers:
        all_headers.update(headers)
    return web.Response(body=orjson.dumps(body) + b"\n", status=status, headers=all_headers)


def error_response(exc: errors.ApiError) -> web.Response:
    return web.Response(body=orjson.dumps(exc.status()) + b"\n", status=exc.code, content_type=JSON, headers=exc.headers or None)


def warning_headers(warnings: list[str]) -> dict[str, str] | None:
    if not warnings:
        return None
    # aiohttp joins repeated keys poorly; one header with comma-separated values is valid HTTP.
    return {"Warning": ", ".join(f'299 - "{w}"' for w in warnings)}
