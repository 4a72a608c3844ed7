"""The generated CRDs: in sync with the models, structural, and their rules do what they say."""

from __future__ import annotations

import importlib.util
import itertools
from typing import Any, Iterator

import celpy
import jsonschema
import kubernetes_validate
import pytest

from trainctl.api.crd import crds, render
from trainctl.api.loader import load_documents
from trainctl.api.validation import validate

from tests.support.jobs import DELETE
from tests.support.repo import REPO

SAMPLES = {
    "PyTorchJob": ["pytorch_mnist.yaml", "pytorch_elastic.yaml", "pytorch_elastic_hpa.yaml", "pytorch_full.yaml"],
    "MSJob": ["msjob_dataparallel.yaml", "msjob_ps.yaml", "msjob_standalone.yaml"],
}


def _gen_crds():
    spec = importlib.util.spec_from_file_location("gen_crds", REPO / "hack" / "gen_crds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def schema_of(kind: str) -> dict[str, Any]:
    for crd in crds().values():
        if crd["spec"]["names"]["kind"] == kind:
            return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    raise KeyError(kind)


# --- files and drift -------------------------------------------------------------------------


def test_committed_files_match_the_models():
    for name, crd in crds().items():
        assert (REPO / "manifests" / "crds" / name).read_text() == render(crd)


def test_check_detects_drift(tmp_path, capsys):
    gen = _gen_crds()
    assert gen.main(["--check"], crd_dir=tmp_path) == 1  # nothing written yet
    assert gen.main([], crd_dir=tmp_path) == 0
    assert gen.main(["--check"], crd_dir=tmp_path) == 0
    target = tmp_path / "kubeflow.org_pytorchjobs.yaml"
    target.write_text(target.read_text().replace("maxProperties: 2", "maxProperties: 3"))
    capsys.readouterr()
    assert gen.main(["--check"], crd_dir=tmp_path) == 1
    assert "kubeflow.org_pytorchjobs.yaml is out of date" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(crds()))
def test_generated_files_parse_as_valid_crds(name):
    [crd] = load_documents((REPO / "manifests" / "crds" / name).read_text())
    # The CustomResourceDefinition object itself, against Kubernetes' own OpenAPI schema.
    kubernetes_validate.validate(crd, "1.30", strict=True)
    version = crd["spec"]["versions"][0]
    assert version["subresources"]["status"] == {}
    assert [col["name"] for col in version["additionalPrinterColumns"]] == ["State", "Age"]
    assert version["additionalPrinterColumns"][0]["jsonPath"] == ".status.conditions[-1:].type"


def test_resource_facts():
    pytorch, msjob = crds()["kubeflow.org_pytorchjobs.yaml"], crds()["mindspore.gitee.com_msjobs.yaml"]
    assert pytorch["metadata"]["name"] == "pytorchjobs.kubeflow.org"
    assert msjob["metadata"]["name"] == "msjobs.mindspore.gitee.com"
    assert pytorch["spec"]["versions"][0]["subresources"]["scale"] == {
        "specReplicasPath": ".spec.pytorchReplicaSpecs.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }
    assert "scale" not in msjob["spec"]["versions"][0]["subresources"]
    run_policy = schema_of("PyTorchJob")["properties"]["spec"]["properties"]["runPolicy"]
    assert run_policy["properties"]["suspend"]["default"] is False
    assert run_policy["default"] == {}
    ms_run_policy = schema_of("MSJob")["properties"]["spec"]["properties"]["runPolicy"]["properties"]
    assert "suspend" not in ms_run_policy and "managedBy" not in ms_run_policy
    assert schema_of("PyTorchJob")["properties"]["spec"]["required"] == ["pytorchReplicaSpecs"]
    assert schema_of("MSJob")["properties"]["spec"]["required"] == ["msReplicaSpecs"]


# --- structural schema (apiextensions' rules) ------------------------------------------------


def nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}[*]")
    if isinstance(schema.get("items"), dict):
        yield from nodes(schema["items"], f"{path}[]")


@pytest.mark.parametrize("kind", SAMPLES)
def test_schemas_are_structural(kind):
    schema = schema_of(kind)
    assert schema["properties"]["metadata"] == {"type": "object"}
    for path, node in nodes(schema):
        assert "$ref" not in node and "allOf" not in node and "oneOf" not in node, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "anyOf" not in node, path
        assert node.get("type") in ("object", "array", "string", "integer", "boolean", "number"), path
        assert not ("properties" in node and "additionalProperties" in node), path
        assert "title" not in node and "nullable" not in node, path
        if "default" in node:
            jsonschema.validate(node["default"], node)


# --- the schema accepts what validation accepts ------------------------------------------------


@pytest.mark.parametrize("kind,sample", [(k, s) for k, names in SAMPLES.items() for s in names])
def test_samples_satisfy_the_schema(load_sample, kind, sample):
    obj = load_sample(sample)
    obj.pop("status", None)  # written through /status, not by users
    jsonschema.validate(obj, schema_of(kind))
    assert cel_violations(schema_of(kind), obj) == []


@pytest.mark.parametrize(
    "changes,message",
    [
        ({("spec", "pytorchReplicaSpecs", "Worker", "restartPolicy"): "Sometimes"}, "'Sometimes' is not one of"),
        ({("spec", "runPolicy"): {"backoffLimit": -1}}, "-1 is less than the minimum of 0"),
        ({("spec", "nprocPerNode"): "0"}, "does not match"),
        ({("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers"): []}, "should be non-empty"),
        (
            {("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers"): [{"image": "x"}]},
            "'name' is a required property",
        ),
        ({("spec", "pytorchReplicaSpecs", "Worker", "template"): {"metadata": {}}}, "'spec' is a required property"),
    ],
)
def test_schema_rejects_bad_input(pytorchjob, mutate, changes, message):
    with pytest.raises(jsonschema.ValidationError, match=message):
        jsonschema.validate(mutate(pytorchjob, changes), schema_of("PyTorchJob"))


# --- CEL rules, evaluated as an API server does ------------------------------------------------


def cel_violations(schema: dict[str, Any], obj: Any, old: Any = None) -> list[str]:
    """Messages of the x-kubernetes-validations rules that fail; transition rules need ``old``."""
    env, out = celpy.Environment(), []
    for rule in schema.get("x-kubernetes-validations", []):
        transition = "oldSelf" in rule["rule"]
        if transition and old is None:
            continue
        activation = {"self": celpy.json_to_cel(obj)}
        if transition:
            activation["oldSelf"] = celpy.json_to_cel(old)
        if not env.program(env.compile(rule["rule"])).evaluate(activation):
            out.append(rule["message"])
    children: list[tuple[dict[str, Any], Any, Any]] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            sub = schema.get("properties", {}).get(key) or (
                schema["additionalProperties"] if isinstance(schema.get("additionalProperties"), dict) else None
            )
            if sub is not None:
                children.append((sub, value, old.get(key) if isinstance(old, dict) else None))
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        children += [(schema["items"], value, None) for value in obj]
    for sub, value, old_value in children:
        out += cel_violations(sub, value, old_value)
    return out


CEL_CASES = [
    ("PyTorchJob", {("spec", "pytorchReplicaSpecs", "Chief"): {}}, None, ["replica types must be Master or Worker"]),
    ("PyTorchJob", {("spec", "pytorchReplicaSpecs", "Master", "replicas"): 2}, None, ["Master replicas must be 1"]),
    ("PyTorchJob", {("spec", "pytorchReplicaSpecs", "Master", "replicas"): DELETE}, None, ["Master replicas must be 1"]),
    ("PyTorchJob", {("spec", "pytorchReplicaSpecs", "Master"): DELETE}, None, []),
    (
        "PyTorchJob",
        {("spec", "elasticPolicy"): {"minReplicas": 3, "maxReplicas": 2}},
        None,
        ["minReplicas must be less than or equal to maxReplicas"],
    ),
    ("PyTorchJob", {("spec", "elasticPolicy"): {"minReplicas": 2, "maxReplicas": 2}}, None, []),
    ("PyTorchJob", {("spec", "elasticPolicy"): {"minReplicas": 2}}, None, []),
    (
        "PyTorchJob",
        {("spec", "elasticPolicy"): {"minReplicas": 1, "maxReplicas": 3}, ("spec", "pytorchReplicaSpecs", "Worker", "replicas"): 5},
        None,
        ["must be between elasticPolicy.minReplicas and elasticPolicy.maxReplicas"],
    ),
    ("PyTorchJob", {("spec", "pytorchReplicaSpecs", "Worker", "replicas"): 0}, None, ["must be at least 1"]),
    (
        "PyTorchJob",
        {("spec", "runPolicy", "schedulingPolicy", "queue"): "b"},
        {("spec", "runPolicy", "schedulingPolicy", "queue"): "a"},
        ["spec.runPolicy.schedulingPolicy.queue is immutable"],
    ),
    (
        "PyTorchJob",
        {("spec", "runPolicy", "schedulingPolicy", "queue"): "a"},
        {("spec", "runPolicy", "schedulingPolicy", "queue"): "a"},
        [],
    ),
    ("PyTorchJob", {("spec", "runPolicy", "schedulingPolicy", "queue"): "a"}, {}, []),
    (
        "PyTorchJob",
        {("spec", "runPolicy", "managedBy"): "kueue.x-k8s.io/multikueue"},
        {("spec", "runPolicy", "managedBy"): "kubeflow.org/training-operator"},
        ["field is immutable"],
    ),
    ("MSJob", {("spec", "msReplicaSpecs", "Scheduler", "replicas"): 2}, None, ["Scheduler replicas must be 1"]),
    ("MSJob", {("spec", "msReplicaSpecs", "Scheduler", "replicas"): DELETE}, None, []),
    (
        "MSJob",
        {("spec", "runPolicy", "schedulingPolicy", "queue"): "b"},
        {("spec", "runPolicy", "schedulingPolicy", "queue"): "a"},
        ["spec.runPolicy.schedulingPolicy.queue is immutable"],
    ),
]


@pytest.mark.parametrize("kind,changes,old_changes,expected", CEL_CASES)
def test_cel_rules(pytorchjob, msjob, mutate, kind, changes, old_changes, expected):
    base = pytorchjob if kind == "PyTorchJob" else msjob
    old = None if old_changes is None else mutate(base, old_changes)
    assert cel_violations(schema_of(kind), mutate(base, changes), old) == expected


def _worker_path_problems(job: dict[str, Any]) -> list[str]:
    """What the CRD's rules say about Worker.replicas, message expressions evaluated."""
    spec = schema_of("PyTorchJob")["properties"]["spec"]
    env, out = celpy.Environment(), []
    activation = {"self": celpy.json_to_cel(job["spec"])}
    for rule in spec["x-kubernetes-validations"]:
        if rule["fieldPath"] == ".pytorchReplicaSpecs.Worker.replicas" and not env.program(env.compile(rule["rule"])).evaluate(activation):
            expression = rule.get("messageExpression")
            out.append(str(env.program(env.compile(expression)).evaluate(activation)) if expression else rule["message"])
    return out


def test_the_crd_and_validate_agree_on_the_worker_count(pytorchjob, mutate):
    """The scale subresource is refused by the CRD's rules and a job judged by ``validate``:
    for every count and elastic range, both say the same words, or nothing."""
    checked = 0
    for count, low, high in itertools.product([None, 0, 1, 2, 3, 5], [None, 1, 2, 3], [None, 1, 2, 3]):
        for elastic in (True, False):
            if not elastic and (low, high) != (None, None):
                continue
            changes: dict[tuple[str, ...], Any] = {("spec", "pytorchReplicaSpecs", "Worker", "replicas"): DELETE if count is None else count}
            if elastic:
                changes[("spec", "elasticPolicy")] = {k: v for k, v in (("minReplicas", low), ("maxReplicas", high)) if v is not None}
            job = mutate(pytorchjob, changes)
            # validate names the count where the server's rule, on the spec object, cannot.
            named = f"Invalid value: {1 if count is None else count}: "
            said = [e.detail.removeprefix(named) for e in validate(job) if e.path == "spec.pytorchReplicaSpecs[Worker].replicas"]
            assert _worker_path_problems(job) == said, (count, low, high, elastic)
            checked += bool(said)
    assert checked > 10


def test_every_field_users_write_is_described():
    """``kubectl explain`` shows each field's description; a field without one is a blank line."""
    for kind in SAMPLES:
        schema = schema_of(kind)
        undescribed = [path for path, node in nodes(schema["properties"]["spec"], ".spec") if not node.get("description")]
        assert undescribed == [], kind
    rdzv_port = schema_of("PyTorchJob")["properties"]["spec"]["properties"]["elasticPolicy"]["properties"]["rdzvPort"]
    assert "rendezvous" in rdzv_port["description"]


def test_every_cel_rule_is_exercised():
    failing = {(kind, msg) for kind, _, _, expected in CEL_CASES for msg in expected}
    messages = {
        (kind, rule["message"])
        for kind in SAMPLES
        for _, node in nodes(schema_of(kind))
        for rule in node.get("x-kubernetes-validations", [])
    }
    assert messages == failing
