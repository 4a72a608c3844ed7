"""The JSONPath subset CRDs use: printer columns (``.status.conditions[-1:].type``,
``.status.conditions[?(@.type=="Ready")].status``) and the scale subresource paths
(``.spec.pytorchReplicaSpecs.Worker.replicas``).

Supported steps: ``.field``, ``['field']``, ``[n]``, ``[a:b]`` slices (negative too), ``[*]``
and filters ``[?(@.a.b=="x")]`` / ``[?(@.a)]``.
"""

from __future__ import annotations

import re
from typing import Any

from trainctl.cluster.apiserver.apimachinery import errors

_STEP = re.compile(
    r"""\.(?P<field>[^.\[\]]+)
      | \[\s*'(?P<quoted>[^']*)'\s*\]
      | \[\s*"(?P<dquoted>[^"]*)"\s*\]
      | \[(?P<slice>-?\d*:-?\d*)\]
      | \[(?P<index>-?\d+)\]
      | \[(?P<star>\*)\]
      | \[\?\(@(?P<fpath>(?:\.[^.=!)\s]+)+)\s*(?:(?P<fop>==|!=)\s*(?P<fval>"[^"]*"|'[^']*'|[^)\s]+))?\s*\)\]
    """,
    re.VERBOSE,
)


def parse(path: str) -> list[tuple[str, Any]]:
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if text.startswith("$"):
        text = text[1:]
    steps: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if not match:
            raise errors.bad_request(f"unsupported JSONPath {path!r}")
        pos = match.end()
        if match.group("field") is not None:
            steps.append(("field", match.group("field")))
        elif match.group("quoted") is not None or match.group("dquoted") is not None:
            steps.append(("field", match.group("quoted") if match.group("quoted") is not None else match.group("dquoted")))
        elif match.group("slice") is not None:
            start, _, stop = match.group("slice").partition(":")
            steps.append(("slice", (int(start) if start else None, int(stop) if stop else None)))
        elif match.group("index") is not None:
            steps.append(("index", int(match.group("index"))))
        elif match.group("star"):
            steps.append(("star", None))
        else:
            value = match.group("fval")
            if value is not None and value[:1] in "\"'":
                value = value[1:-1]
            steps.append(("filter", (match.group("fpath").strip(".").split("."), match.group("fop"), value)))
    return steps


def find(obj: Any, path: str) -> list[Any]:
    """All values ``path`` selects in ``obj`` (empty when nothing matches)."""
    current = [obj]
    for kind, arg in parse(path):
        following: list[Any] = []
        for value in current:
            if kind == "field":
                if isinstance(value, dict) and arg in value:
                    following.append(value[arg])
            elif kind == "index":
                if isinstance(value, list) and -len(value) <= arg < len(value):
                    following.append(value[arg])
            elif kind == "slice":
                if isinstance(value, list):
                    following.extend(value[arg[0]:arg[1]])
            elif kind == "star":
                if isinstance(value, list):
                    following.extend(value)
                elif isinstance(value, dict):
                    following.extend(value.values())
            elif kind == "filter" and isinstance(value, list):
                fields, op, expected = arg
                for item in value:
                    found = _walk(item, fields)
                    if op is None:
                        keep = found is not None
                    else:
                        keep = (str(found) if found is not None else None) == expected
                        keep = keep if op == "==" else not keep
                    if keep:
                        following.append(item)
        current = following
    return current


def _walk(value: Any, fields: list[str]) -> Any:
    for name in fields:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def fields_of(path: str) -> list[str]:
    """The field names of a plain dotted path (scale paths), for writing into an object."""
    steps = parse(path)
    if any(kind != "field" for kind, _ in steps):
        raise errors.bad_request(f"only plain field paths are supported here: {path!r}")
    return [arg for _, arg in steps]
