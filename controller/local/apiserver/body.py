"""Request bodies: read and decoded (JSON, YAML, or protobuf for the kinds kubectl sends so)."""

from __future__ import annotations

from typing import Any

import orjson
import yaml
from aiohttp import web

from . import errors, protobuf
from .responses import JSON


def content_type(request: web.BaseRequest, default: str = "") -> str:
    return request.headers.get("Content-Type", default).split(";")[0].strip()


async def read(request: web.BaseRequest) -> bytes:
    return await request.read()


async def decoded(request: web.BaseRequest) -> Any:
    """The request body as JSON data; None when it is empty."""
    raw = await read(request)
    media = content_type(request, JSON) or JSON
    if media == protobuf.CONTENT_TYPE:
        return protobuf.decode(raw)
    if media not in (JSON, "application/yaml", "*/*"):
        raise errors.unsupported_media_type(
            f"the body of the request was in an unknown format - accepted media types include: {JSON}, "
            f"application/yaml, {protobuf.CONTENT_TYPE}")
    if not raw.strip():
        return None
    try:
        if media == "application/yaml":
            return yaml.safe_load(raw)
        return orjson.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        message = str(exc).splitlines()[0]
        raise errors.bad_request(f"the body of the request was in an unknown format - {message}") from None
