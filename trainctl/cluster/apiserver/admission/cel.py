"""``x-kubernetes-validations``: CEL rules of a CRD schema, evaluated with ``cel-python``.

A rule sees the value at its schema node as ``self`` (and, for transition rules, the stored
value as ``oldSelf``; such rules are skipped on create, as in Kubernetes). A rule that is
false, or fails to evaluate, is one 422 cause carrying the rule's ``message`` (or
``messageExpression``), ``reason`` and ``fieldPath``, worded as apiextensions-apiserver words
them: a ``fieldPath`` names map keys as ``[key]``, and an evaluation error is said in CEL's
terms (``no such key: x evaluating rule: ...``), never in the evaluator's Python internals.
"""

from __future__ import annotations

import contextlib
import functools
import re
from typing import TYPE_CHECKING, Any

from trainctl.cluster.apiserver.apimachinery.errors import Cause

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


def has_rules(schema: Any) -> bool:
    """Whether any node of a schema tree carries ``x-kubernetes-validations``."""
    if not isinstance(schema, dict):
        return False
    if schema.get("x-kubernetes-validations"):
        return True
    subs = [*(schema.get("properties") or {}).values(), schema.get("items"), schema.get("additionalProperties"),
            *(schema.get("allOf") or [])]
    return any(has_rules(sub) for sub in subs)


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


def _rule_text(rule: dict[str, Any]) -> str:
    return str(rule.get("message") or "").strip() or str(rule["rule"]).strip()


_MISSING_KEY = re.compile(r"'(.*)'$")


def _evaluation_error(exc: Exception, rule: dict[str, Any]) -> str:
    """An evaluation failure in cel-go's words (what kube-apiserver reports)."""
    args = exc.args
    cause = args[1] if len(args) > 1 and isinstance(args[1], type) else type(exc)
    if issubclass(cause, TypeError):
        return ("'no such overload': call arguments did not match a supported operator, function or macro "
                f"signature for rule: {_rule_text(rule)}")
    if issubclass(cause, KeyError):
        key = _MISSING_KEY.search(str(args[0]) if args else "")
        error = f"no such key: {key.group(1)}" if key else "no such key"
    elif issubclass(cause, ZeroDivisionError):
        error = "division by zero"
    elif issubclass(cause, IndexError):
        error = "index out of bounds"
    elif "overflow" in str(args[0] if args else exc):
        error = "integer overflow"
    else:
        error = "evaluation error"
    return f"{error} evaluating rule: {_rule_text(rule)}"


def field_path(path: str, json_path: str, schema: dict[str, Any]) -> str:
    """A rule's ``fieldPath`` (``.a.b``, ``['k']``) below ``path``, map keys as ``[key]``."""
    out, node = path, schema
    for dotted, quoted in re.findall(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]", json_path):
        name = dotted or quoted.replace("\\'", "'")
        properties = node.get("properties") if isinstance(node, dict) else None
        if properties is None and isinstance(node, dict) and isinstance(node.get("additionalProperties"), dict):
            out, node = f"{out}[{name}]", node["additionalProperties"]
        else:
            out, node = (f"{out}.{name}" if out else name), (properties or {}).get(name, {})
    return out


def _cause(field: str, reason: str, shown: str, detail: str) -> Cause:
    """A failed rule as field.Error renders it for its ``reason``."""
    if reason == "FieldValueForbidden":
        return Cause(field, reason, f"Forbidden: {detail}")
    if reason == "FieldValueRequired":
        return Cause(field, reason, f"Required value: {detail}")
    if reason == "FieldValueDuplicate":
        return Cause(field, reason, f"Duplicate value: {shown}")
    return Cause(field, "FieldValueInvalid", f"Invalid value: {shown}: {detail}")


def check(schema: dict[str, Any], value: Any, old: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    shown = f'"{schema.get("type") or "object"}"'  # the schema's type, as kube-apiserver shows it
    for rule in schema.get("x-kubernetes-validations") or []:
        expression = rule["rule"]
        if "oldSelf" in expression and old is None:
            continue
        field = field_path(path, rule["fieldPath"], schema) if rule.get("fieldPath") else path
        try:
            ok = _evaluate(expression, value, old)
        except Exception as exc:
            causes.append(Cause(field, "FieldValueInvalid", f"Invalid value: {shown}: {_evaluation_error(exc, rule)}"))
            continue
        if _is_true(ok):
            continue
        message = str(rule.get("message") or "").strip() or f"failed rule: {expression.strip()}"
        if rule.get("messageExpression"):
            with contextlib.suppress(Exception):  # a failing messageExpression falls back to message
                message = str(_evaluate(rule["messageExpression"], value, old)).strip() or message
        causes.append(_cause(field, rule.get("reason") or "FieldValueInvalid", shown, message))
    return causes
