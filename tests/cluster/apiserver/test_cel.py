"""CEL rules of a CRD schema, worded as apiextensions-apiserver words them (no server needed)."""

from __future__ import annotations

from typing import Any

import pytest

from trainctl.cluster.apiserver.admission import cel, schema

SPEC = {
    "type": "object",
    "properties": {
        "replicaSpecs": {
            "type": "object",
            "additionalProperties": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        },
        "limit": {"type": "integer"},
        "name": {"type": "string"},
    },
}


def rules(*rules: dict[str, Any]) -> dict[str, Any]:
    return {**SPEC, "x-kubernetes-validations": list(rules)}


def messages(node: dict[str, Any], value: Any) -> list[tuple[str, str, str]]:
    return [(c.field, c.reason, c.message) for c in cel.check(node, value, None, "spec")]


def test_a_field_path_names_map_keys_in_brackets_as_field_paths_do():
    node = rules({"rule": "self.replicaSpecs.Worker.replicas <= self.limit",
                  "messageExpression": "'must be at most ' + string(self.limit)",
                  "fieldPath": ".replicaSpecs.Worker.replicas"})
    assert messages(node, {"replicaSpecs": {"Worker": {"replicas": 5}}, "limit": 3}) == [
        ("spec.replicaSpecs[Worker].replicas", "FieldValueInvalid", 'Invalid value: "object": must be at most 3')]
    assert cel.field_path("spec", ".replicaSpecs['a.b'].replicas", node) == "spec.replicaSpecs[a.b].replicas"


@pytest.mark.parametrize(("reason", "said"), [
    ("FieldValueForbidden", "Forbidden: no"),
    ("FieldValueRequired", "Required value: no"),
    ("FieldValueInvalid", 'Invalid value: "object": no'),
])
def test_a_rules_reason_picks_the_error_type(reason, said):
    node = rules({"rule": "self.limit < 3", "message": "no", "reason": reason})
    assert messages(node, {"limit": 4}) == [("spec", reason, said)]


@pytest.mark.parametrize(("rule", "value", "said"), [
    ("self.replicaSpecs.Worker.replicas > 0", {"replicaSpecs": {}},
     'Invalid value: "object": no such key: Worker evaluating rule: self.replicaSpecs.Worker.replicas > 0'),
    ("self.limit / 0 > 1", {"limit": 1}, 'Invalid value: "object": division by zero evaluating rule: self.limit / 0 > 1'),
    ("self.limit < self.name", {"limit": 1, "name": "x"},
     "Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or "
     "macro signature for rule: self.limit < self.name"),
])
def test_an_evaluation_error_is_said_in_cels_words_not_the_evaluators(rule, value, said):
    [(_, _, message)] = messages(rules({"rule": rule}), value)
    assert message == said
    assert "celpy" not in message and "Token(" not in message


def test_the_rules_wait_until_the_object_has_the_types_they_expect():
    node = {"type": "object", "properties": {"spec": rules({"rule": "self.limit <= 3", "message": "too big"})}}
    causes = schema.validate({"spec": {"limit": "three"}}, node)
    assert [(c.field, c.message) for c in causes] == [
        ("spec.limit", 'Invalid value: "string": spec.limit in body must be of type integer: "string"'),
        ("<nil>", schema.RULES_NOT_CHECKED.message),
    ]
    assert [c.message for c in schema.validate({"spec": {"limit": 4}}, node)] == ['Invalid value: "object": too big']


def test_a_schema_without_rules_says_nothing_about_rules():
    causes = schema.validate({"spec": {"limit": "three"}}, {"type": "object", "properties": {"spec": SPEC}})
    assert [c.field for c in causes] == ["spec.limit"]
