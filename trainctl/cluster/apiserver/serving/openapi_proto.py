"""``/openapi/v2`` in the protobuf encoding kubectl asks for.

client-go fetches the v2 document only as ``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``:
an ``openapi.v2.Document`` message of the gnostic project's ``OpenAPIv2.proto``. kubectl reads
it for ``kubectl explain --output=plaintext-openapiv2``, for client-side validation when a
server does not validate fields itself, and to find patch types. This module writes the JSON
form ``openapi`` builds into that message. No Python package carries the generated messages,
so the field numbers below are transcribed from that ``.proto`` file. Values of type ``Any``
(defaults, enums, examples, vendor extensions) travel as YAML text; JSON is YAML, so they are
written as JSON.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"  # what clients ask for
CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"  # "@" is not valid in a reply
Obj = dict[str, Any]

_VARINT, _FIXED64, _BYTES = 0, 1, 2


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _message(field: int, body: bytes) -> bytes:
    return _key(field, _BYTES) + _varint(len(body)) + body


def _string(field: int, value: Any, *, keep_empty: bool = False) -> bytes:
    if not isinstance(value, str) or (not value and not keep_empty):
        return b""
    return _message(field, value.encode())


def _strings(field: int, values: Any) -> bytes:
    return b"".join(_string(field, v, keep_empty=True) for v in values or () if isinstance(v, str))


def _bool(field: int, value: Any) -> bytes:
    return _key(field, _VARINT) + b"\x01" if value is True else b""


def _int(field: int, value: Any) -> bytes:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return b""
    return _key(field, _VARINT) + _varint(value)


def _double(field: int, value: Any) -> bytes:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return b""
    return _key(field, _FIXED64) + struct.pack("<d", float(value))


def _any(value: Any) -> bytes:  # openapi.v2.Any: yaml = 2
    return _string(2, orjson.dumps(value).decode(), keep_empty=True)


def _named(field: int, name: str, value: bytes) -> bytes:  # Named*: name = 1, value = 2
    return _message(field, _string(1, name, keep_empty=True) + _message(2, value))


def _extensions(field: int, node: Obj) -> bytes:
    return b"".join(_named(field, key, _any(value)) for key, value in node.items() if key.startswith("x-"))


# --- Schema ---------------------------------------------------------------------------------


def schema(node: Any) -> bytes:
    """An ``openapi.v2.Schema`` from a Swagger 2.0 schema object."""
    if not isinstance(node, dict):
        return b""
    out = [
        _string(1, node.get("$ref")), _string(2, node.get("format")), _string(3, node.get("title")),
        _string(4, node.get("description")),
        _message(5, _any(node["default"])) if "default" in node else b"",
        _double(6, node.get("multipleOf")), _double(7, node.get("maximum")), _bool(8, node.get("exclusiveMaximum")),
        _double(9, node.get("minimum")), _bool(10, node.get("exclusiveMinimum")),
        _int(11, node.get("maxLength")), _int(12, node.get("minLength")), _string(13, node.get("pattern")),
        _int(14, node.get("maxItems")), _int(15, node.get("minItems")), _bool(16, node.get("uniqueItems")),
        _int(17, node.get("maxProperties")), _int(18, node.get("minProperties")),
        _strings(19, node.get("required")),
        b"".join(_message(20, _any(v)) for v in node.get("enum") or () if isinstance(node.get("enum"), list)),
    ]
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        out.append(_message(21, _message(1, schema(additional))))
    elif isinstance(additional, bool):
        out.append(_message(21, _key(2, _VARINT) + (b"\x01" if additional else b"\x00")))
    types = node.get("type")
    if types:
        out.append(_message(22, _strings(1, types if isinstance(types, list) else [types])))
    items = node.get("items")
    if items:
        out.append(_message(23, b"".join(_message(1, schema(i)) for i in (items if isinstance(items, list) else [items]))))
    out += [_message(24, schema(s)) for s in node.get("allOf") or () if isinstance(s, dict)]
    properties = node.get("properties")
    if isinstance(properties, dict):
        out.append(_message(25, b"".join(_named(1, name, schema(sub)) for name, sub in properties.items())))
    out += [_bool(27, node.get("readOnly")), _message(30, _any(node["example"])) if "example" in node else b"",
            _extensions(31, node)]
    return b"".join(out)


# --- paths ----------------------------------------------------------------------------------

_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def _parameter(param: Obj) -> bytes:
    """An ``openapi.v2.ParametersItem`` (parameter = 1) for a body or query parameter."""
    if param.get("in") == "body":
        body = (_string(1, param.get("description")) + _string(2, param.get("name")) + _string(3, "body")
                + _bool(4, param.get("required")) + _message(5, schema(param.get("schema") or {})))
        return _message(1, _message(1, body))
    query = (_bool(1, param.get("required")) + _string(2, param.get("in")) + _string(3, param.get("description"))
             + _string(4, param.get("name")) + _string(6, param.get("type")) + _bool(20, param.get("uniqueItems")))
    return _message(1, _message(2, _message(3, query)))


def _operation(operation: Obj) -> bytes:
    responses = b"".join(
        _named(1, code, _message(1, _string(1, response.get("description"), keep_empty=True)
                                 + (_message(2, _message(1, schema(response["schema"]))) if "schema" in response else b"")))
        for code, response in (operation.get("responses") or {}).items())
    return b"".join([
        _strings(6, operation.get("produces")), _strings(7, operation.get("consumes")),
        b"".join(_message(8, _parameter(p)) for p in operation.get("parameters") or ()),
        _message(9, responses), _extensions(13, operation),
    ])


def document(swagger: Obj) -> bytes:
    """An ``openapi.v2.Document`` from a Swagger 2.0 document."""
    info = swagger.get("info") or {}
    paths = b"".join(
        _named(2, path, b"".join(_message(_METHODS[m], _operation(op)) for m, op in item.items() if m in _METHODS))
        for path, item in (swagger.get("paths") or {}).items())
    definitions = b"".join(_named(1, name, schema(node)) for name, node in (swagger.get("definitions") or {}).items())
    return b"".join([
        _string(1, swagger.get("swagger")),
        _message(2, _string(1, info.get("title")) + _string(2, info.get("version"))),
        _message(8, paths), _message(9, definitions),
    ])
