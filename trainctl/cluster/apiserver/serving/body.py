"""Request bodies: read within ``request_limits.MAX_REQUEST_BYTES`` and decoded (JSON, YAML, or
protobuf for the kinds kubectl sends so) within ``request_limits.MAX_DEPTH``.

A body announced as too large is refused before any of it is read; one that turns out too
large (chunked) is refused as soon as it passes the limit.

Decoding runs off the event loop (``request_limits.off_loop``), but for small JSON bodies.
"""

from __future__ import annotations

from typing import Any

import yaml
from aiohttp import web

from trainctl.cluster.apiserver.apimachinery import errors, request_limits
from trainctl.cluster.apiserver.serving import protobuf
from trainctl.cluster.apiserver.serving.responses import JSON


def content_type(request: web.BaseRequest, default: str = "") -> str:
    return request.headers.get("Content-Type", default).split(";")[0].strip()


async def read(request: web.BaseRequest) -> bytes:
    """The whole body, or 413 when it is larger than kube-apiserver would take."""
    if request.content_length is not None and request.content_length > request_limits.MAX_REQUEST_BYTES:
        raise request_limits.request_too_large(request.content_length)
    try:
        return await request.read()  # bounded: the server's client_max_size is the same limit
    except web.HTTPRequestEntityTooLarge:
        raise request_limits.request_too_large() from None


async def decoded(request: web.BaseRequest) -> Any:
    """The request body as JSON data; None when it is empty."""
    raw = await read(request)
    media = content_type(request, JSON) or JSON
    if media not in (JSON, "application/yaml", "*/*", protobuf.CONTENT_TYPE):
        raise errors.unsupported_media_type(
            f"the body of the request was in an unknown format - accepted media types include: {JSON}, "
            f"application/yaml, {protobuf.CONTENT_TYPE}")
    if media != protobuf.CONTENT_TYPE and not raw.strip():
        return None
    if media != "application/yaml" and media != protobuf.CONTENT_TYPE and len(raw) <= request_limits.INLINE_JSON_BYTES:
        return decode(media, raw)
    return await request_limits.off_loop(decode, media, raw)


def decode(media: str, raw: bytes) -> Any:
    """``raw`` in the accepted media type ``media`` as JSON data, within the limits."""
    if media == protobuf.CONTENT_TYPE:
        return request_limits.check_depth(protobuf.decode(raw))
    try:
        if media == "application/yaml":
            return request_limits.decode_yaml(raw)
        return request_limits.decode_json(raw)
    except (ValueError, yaml.YAMLError) as exc:
        message = str(exc).splitlines()[0]
        raise errors.bad_request(f"the body of the request was in an unknown format - {message}") from None
