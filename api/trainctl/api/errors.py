"""Problems with a job, each tied to a Kubernetes-style field path.

Every check in trainctl (type errors found while parsing, the webhook rules, the update
rules) reports a ``FieldError``, so a user sees one kind of message whichever layer found
the problem: ``spec.pytorchReplicaSpecs[Master].replicas: must be 1``. The types are those
of Kubernetes' ``field.ErrorType`` and the paths follow ``field.Path``: ``.name`` for a
field, ``[key]`` for a map key, ``[i]`` for a list index.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Iterable, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from trainctl.api import constants as c

ErrorType = Literal["Required", "Invalid", "NotSupported", "Forbidden", "Duplicate", "TypeInvalid"]


@dataclass(frozen=True, slots=True)
class FieldError:
    path: str
    type: ErrorType
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}" if self.path else self.detail


class JobInvalid(Exception):
    """A job that cannot be used; ``errors`` lists every problem found."""

    def __init__(self, errors: list[FieldError]):
        super().__init__("; ".join(map(str, errors)))
        self.errors = errors


# Patterns said in words, for the people who read the errors.
PATTERN_WORDS = {
    c.NPROC_PATTERN: "be auto, cpu, gpu or a positive integer",
}

def json_type(value: Any) -> str:
    """The JSON name of a value's type, as a user who wrote YAML thinks of it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def show(value: Any) -> str:
    """A short, quoted rendering of a user's value for an error message."""
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):  # circular structures
        text = json_type(value)
    return text if len(text) <= 60 else text[:57] + "..."


def supported(values: Iterable[str]) -> str:
    return "supported values: " + ", ".join(json.dumps(v) for v in values)


def map_fields(*models: type[BaseModel]) -> frozenset[str]:
    """Wire names of the fields that are maps: in an error location their next element is a key."""
    names: set[str] = set()
    seen: set[type] = set()
    pending = list(models)
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            for tp in _types_in(field.annotation):
                if tp is dict:
                    names.add(field.alias or name)
                elif isinstance(tp, type) and issubclass(tp, BaseModel):
                    pending.append(tp)
    return frozenset(names)


def _types_in(annotation: Any) -> Iterable[Any]:
    """Every class mentioned in a type annotation (``Optional[dict[str, X]]`` → dict, str, X)."""
    origin = get_origin(annotation)
    if origin is None:
        yield annotation
        return
    if origin is not Annotated:
        yield origin
    for arg in get_args(annotation):
        yield from _types_in(arg)


_TYPE_NAMES = {
    "int_type": "an integer",
    "string_type": "a string",
    "bool_type": "a boolean",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "an array",
    "int_or_string_type": "an integer or a string",
}


def from_validation_error(exc: ValidationError, maps: frozenset[str], prefix: str = "") -> list[FieldError]:
    """Translate pydantic's errors into field errors with Kubernetes paths."""
    errors = []
    for err in exc.errors(include_url=False, include_context=True):
        path, is_key = _path(err["loc"], maps, prefix)
        kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
        if is_key:
            errors.append(FieldError(path, "TypeInvalid", f"map keys must be strings, not {json_type(value)} {show(value)}"))
        elif kind == "missing":
            errors.append(FieldError(path, "Required", "Required value"))
        elif kind in _TYPE_NAMES:
            errors.append(FieldError(path, "TypeInvalid", f"must be {_TYPE_NAMES[kind]}, not {json_type(value)} {show(value)}"))
        elif kind == "literal_error":
            options = [o.strip().strip("'") for o in ctx.get("expected", "").replace(" or ", ", ").split(",")]
            errors.append(FieldError(path, "NotSupported", f"unsupported value {show(value)}; {supported(options)}"))
        elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            words = {
                "greater_than_equal": "greater than or equal to",
                "less_than_equal": "less than or equal to",
                "greater_than": "greater than",
                "less_than": "less than",
            }[kind]
            bound = next(iter(ctx.values()), "")
            errors.append(FieldError(path, "Invalid", f"must be {words} {bound}, not {show(value)}"))
        elif kind == "int_range":
            errors.append(FieldError(path, "Invalid", f"must be between {ctx['low']} and {ctx['high']}, not {show(value)}"))
        elif kind == "string_pattern_mismatch":
            pattern = str(ctx.get("pattern"))
            wanted = PATTERN_WORDS.get(pattern, f"match {pattern}")
            errors.append(FieldError(path, "Invalid", f"invalid value {show(value)}: must {wanted}"))
        else:
            errors.append(FieldError(path, "Invalid", err["msg"]))
    return errors


def _path(loc: tuple[Any, ...], maps: frozenset[str], prefix: str) -> tuple[str, bool]:
    path = prefix
    key_next = False
    for part in loc:
        if part == "[key]":
            return path, True
        if isinstance(part, int) or key_next:
            path += f"[{part}]"
            key_next = False
        else:
            path = f"{path}.{part}" if path else str(part)
            key_next = part in maps
    return path, False
