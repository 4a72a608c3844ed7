"""``x-kubernetes-validations``: CEL rules of a CRD schema, evaluated with ``cel-python``.

A rule sees the value at its schema node as ``self`` (and, for transition rules, the stored
value as ``oldSelf``; such rules are skipped on create, as in Kubernetes). A rule that is
false, or fails to evaluate, is one 422 cause carrying the rule's ``message`` (or
``messageExpression``), ``reason`` and ``fieldPath``.
"""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING, Any

from .errors import Cause

if TYPE_CHECKING:
    import celpy


@functools.lru_cache(maxsize=1)
def _environment() -> celpy.Environment:
    # Importing cel-python and building its parser take a quarter of a second: only servers
    # that meet CEL rules pay for them.
    import celpy

    return celpy.Environment()


@functools.lru_cache(maxsize=1024)
def _program(expression: str) -> Any:
    env = _environment()
    return env.program(env.compile(expression))


def compile_errors(schema: Any, path: str = "") -> list[Cause]:
    """Problems with the rules of a whole schema tree (checked when a CRD is written)."""
    problems: list[Cause] = []
    if not isinstance(schema, dict):
        return problems
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        where = f"{path}.x-kubernetes-validations[{i}]"
        expression = rule.get("rule") if isinstance(rule, dict) else None
        if not isinstance(expression, str) or not expression:
            problems.append(Cause(f"{where}.rule", "FieldValueRequired", "Required value"))
            continue
        try:
            _program(expression)
        except Exception as exc:  # celpy raises its own and lark's errors
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            problems.append(Cause(f"{where}.rule", "FieldValueInvalid",
                                  f"Invalid value: {expression!r}: compilation failed: {first}"))
    for key, sub in (schema.get("properties") or {}).items():
        problems += compile_errors(sub, f"{path}.properties[{key}]")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            problems += compile_errors(schema[key], f"{path}.{key}")
    return problems


def _evaluate(expression: str, value: Any, old: Any) -> Any:
    from celpy.adapter import json_to_cel
    from celpy.evaluation import CELEvalError

    activation = {"self": json_to_cel(value)}
    if old is not None:
        activation["oldSelf"] = json_to_cel(old)
    result = _program(expression).evaluate(activation)
    if isinstance(result, CELEvalError):
        raise result
    return result


def _is_true(result: Any) -> bool:
    from celpy import celtypes

    return isinstance(result, celtypes.BoolType) and bool(result)


def check(schema: dict[str, Any], value: Any, old: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for rule in schema.get("x-kubernetes-validations") or []:
        expression = rule["rule"]
        if "oldSelf" in expression and old is None:
            continue
        field = path
        if rule.get("fieldPath"):
            field = f"{path}{rule['fieldPath']}" if path else rule["fieldPath"].lstrip(".")
        try:
            ok = _evaluate(expression, value, old)
        except Exception as exc:
            causes.append(Cause(field, "FieldValueInvalid",
                                f"Invalid value: \"object\": rule evaluation failed: {exc}"))
            continue
        if _is_true(ok):
            continue
        message = rule.get("message") or f"failed rule: {expression}"
        if rule.get("messageExpression"):
            with contextlib.suppress(Exception):  # a failing messageExpression falls back to message
                message = str(_evaluate(rule["messageExpression"], value, old))
        reason = rule.get("reason") or "FieldValueInvalid"
        shown = '"object"' if isinstance(value, dict) else ('"array"' if isinstance(value, list) else repr(value))
        causes.append(Cause(field, reason, f"Invalid value: {shown}: {message}"))
    return causes
