"""The validation rules, table-driven from the specs (PyTorchJob §1.6, MSJob §1.5 and §2.13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainctl.api.validation import validate, warnings

from tests.support.jobs import DELETE

M = ("spec", "pytorchReplicaSpecs", "Master")
W = ("spec", "pytorchReplicaSpecs", "Worker")
RP = ("spec", "runPolicy")
EP = ("spec", "elasticPolicy")
S = ("spec", "msReplicaSpecs", "Scheduler")
MW = ("spec", "msReplicaSpecs", "Worker")
CONTAINERS = ("template", "spec", "containers")
ELASTIC = {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 3}
NAMED_OTHER = [{"name": "main", "image": "img"}]


def pairs(obj):
    return [(e.path, e.type) for e in validate(obj)]


PYTORCH_CASES = [
    # --- the reference webhook's rules (spec §1.6)
    ("name not DNS-1035", {("metadata", "name"): "My_Job"}, [("metadata.name", "Invalid")]),
    ("name starts with digit", {("metadata", "name"): "1job"}, [("metadata.name", "Invalid")]),
    ("managedBy empty", {RP + ("managedBy",): ""}, [("spec.runPolicy.managedBy", "NotSupported")]),
    ("managedBy unknown", {RP + ("managedBy",): "me"}, [("spec.runPolicy.managedBy", "NotSupported")]),
    ("managedBy multikueue", {RP + ("managedBy",): "kueue.x-k8s.io/multikueue"}, []),
    ("elastic without Worker", {W: DELETE, EP: {"rdzvBackend": "c10d"}}, [("spec.pytorchReplicaSpecs[Worker]", "Required")]),
    (
        "both nproc fields",
        {EP: {"nProcPerNode": 2}, ("spec", "nprocPerNode"): "2"},
        [("spec.elasticPolicy.nProcPerNode", "Forbidden")],
    ),
    ("no replica specs", {("spec", "pytorchReplicaSpecs"): DELETE}, [("spec.pytorchReplicaSpecs", "Required")]),
    (
        "unknown replica type",
        {("spec", "pytorchReplicaSpecs", "Chief"): {}},
        [("spec.pytorchReplicaSpecs[Chief]", "NotSupported")],
    ),
    (
        "wrong-case replica type",
        {("spec", "pytorchReplicaSpecs", "worker"): {}},
        [("spec.pytorchReplicaSpecs[worker]", "NotSupported")],
    ),
    (
        "no containers: two errors on one path",
        {M + CONTAINERS: []},
        [("spec.pytorchReplicaSpecs[Master].template.spec.containers", "Required")] * 2,
    ),
    (
        "no template at all",
        {M + ("template",): DELETE},
        [("spec.pytorchReplicaSpecs[Master].template.spec.containers", "Required")] * 2,
    ),
    (
        "empty image",
        {W + CONTAINERS + (0, "image"): ""},
        [("spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image", "Required")],
    ),
    (
        "no container named pytorch",
        {W + CONTAINERS: NAMED_OTHER},
        [("spec.pytorchReplicaSpecs[Worker].template.spec.containers", "Required")],
    ),
    ("Master replicas unset", {M + ("replicas",): DELETE}, [("spec.pytorchReplicaSpecs[Master].replicas", "Forbidden")]),
    ("Master replicas 2", {M + ("replicas",): 2}, [("spec.pytorchReplicaSpecs[Master].replicas", "Forbidden")]),
    ("Worker replicas 0", {W + ("replicas",): 0}, [("spec.pytorchReplicaSpecs[Worker].replicas", "Forbidden")]),
    ("Worker replicas unset is fine", {W + ("replicas",): DELETE}, []),
    ("Worker only", {M: DELETE}, []),
    # --- the gaps the issue lists
    ("min > max", {EP: {"minReplicas": 3, "maxReplicas": 2}}, [("spec.elasticPolicy.minReplicas", "Invalid")]),
    ("Worker above max", {EP: ELASTIC, W + ("replicas",): 4}, [("spec.pytorchReplicaSpecs[Worker].replicas", "Invalid")]),
    (
        "Worker below min",
        {EP: {"minReplicas": 3}, W + ("replicas",): 2},
        [("spec.pytorchReplicaSpecs[Worker].replicas", "Invalid")],
    ),
    ("Worker within bounds", {EP: ELASTIC}, []),
    ("elastic min 0", {EP: {"minReplicas": 0}}, [("spec.elasticPolicy.minReplicas", "Invalid")]),
    ("unknown rdzvBackend", {EP: {"rdzvBackend": "zookeeper"}}, [("spec.elasticPolicy.rdzvBackend", "NotSupported")]),
    ("rdzvPort out of range", {EP: {"rdzvPort": 70000}}, [("spec.elasticPolicy.rdzvPort", "Invalid")]),
    (
        "unknown restartPolicy",
        {W + ("restartPolicy",): "Sometimes"},
        [("spec.pytorchReplicaSpecs[Worker].restartPolicy", "NotSupported")],
    ),
    ("empty restartPolicy", {W + ("restartPolicy",): ""}, [("spec.pytorchReplicaSpecs[Worker].restartPolicy", "NotSupported")]),
    ("unknown cleanPodPolicy", {RP + ("cleanPodPolicy",): "Some"}, [("spec.runPolicy.cleanPodPolicy", "NotSupported")]),
    ("nprocPerNode auto", {("spec", "nprocPerNode"): "auto"}, []),
    ("nprocPerNode gpu", {("spec", "nprocPerNode"): "gpu"}, []),
    ("nprocPerNode 8", {("spec", "nprocPerNode"): "8"}, []),
    ("nprocPerNode 0", {("spec", "nprocPerNode"): "0"}, [("spec.nprocPerNode", "Invalid")]),
    ("nprocPerNode word", {("spec", "nprocPerNode"): "many"}, [("spec.nprocPerNode", "Invalid")]),
    ("nprocPerNode integer", {("spec", "nprocPerNode"): 4}, [("spec.nprocPerNode", "TypeInvalid")]),
    ("negative deadline", {RP + ("activeDeadlineSeconds",): -1}, [("spec.runPolicy.activeDeadlineSeconds", "Invalid")]),
    ("negative TTL", {RP + ("ttlSecondsAfterFinished",): -5}, [("spec.runPolicy.ttlSecondsAfterFinished", "Invalid")]),
    ("negative backoffLimit", {RP + ("backoffLimit",): -1}, [("spec.runPolicy.backoffLimit", "Invalid")]),
    ("zero limits are fine", {RP: {"backoffLimit": 0, "ttlSecondsAfterFinished": 0}}, []),
    ("name too long for worker services", {("metadata", "name"): "j" * 55}, [("metadata.name", "Invalid")]),
    ("longest name that fits", {("metadata", "name"): "j" * 54}, []),
    (
        "elastic max counts for the name",
        {("metadata", "name"): "j" * 54, EP: {"minReplicas": 1, "maxReplicas": 11}},
        [("metadata.name", "Invalid")],
    ),
    ("generateName instead of name", {("metadata", "name"): DELETE, ("metadata", "generateName"): "mnist-"}, []),
    ("neither name nor generateName", {("metadata", "name"): DELETE}, [("metadata.name", "Required")]),
    # --- types, reported with the same paths
    ("replicas as string", {W + ("replicas",): "2"}, [("spec.pytorchReplicaSpecs[Worker].replicas", "TypeInvalid")]),
    ("replicas as bool", {W + ("replicas",): True}, [("spec.pytorchReplicaSpecs[Worker].replicas", "TypeInvalid")]),
    ("replicas beyond int32", {W + ("replicas",): 2**31}, [("spec.pytorchReplicaSpecs[Worker].replicas", "Invalid")]),
    ("deadline beyond int64", {RP + ("activeDeadlineSeconds",): 2**63}, [("spec.runPolicy.activeDeadlineSeconds", "Invalid")]),
    ("replica spec null", {W: None}, [("spec.pytorchReplicaSpecs[Worker]", "TypeInvalid")]),
    ("template as list", {W + ("template",): []}, [("spec.pytorchReplicaSpecs[Worker].template", "TypeInvalid")]),
    (
        "containers as map",
        {W + CONTAINERS: {"name": "pytorch"}},
        [("spec.pytorchReplicaSpecs[Worker].template.spec.containers", "TypeInvalid")],
    ),
    (
        "container without name",
        {W + CONTAINERS: [{"image": "img"}]},
        [
            ("spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].name", "Required"),
            ("spec.pytorchReplicaSpecs[Worker].template.spec.containers", "Required"),
        ],
    ),
    ("metadata as string", {("metadata",): "x"}, [("metadata.name", "Required"), ("metadata", "TypeInvalid")]),
    ("suspend as string", {RP + ("suspend",): "true"}, [("spec.runPolicy.suspend", "TypeInvalid")]),
    ("unknown fields are kept, not errors", {("spec", "somethingNew"): {"a": 1}}, []),
]


@pytest.mark.parametrize("changes,expected", [c[1:] for c in PYTORCH_CASES], ids=[c[0] for c in PYTORCH_CASES])
def test_pytorchjob_rules(pytorchjob, mutate, changes, expected):
    assert pairs(mutate(pytorchjob, changes)) == expected


MSJOB_CASES = [
    ("valid sample", {}, []),
    ("Scheduler replicas 2", {S + ("replicas",): 2}, [("spec.msReplicaSpecs[Scheduler].replicas", "Invalid")]),
    ("Scheduler replicas unset means 1", {S + ("replicas",): DELETE}, []),
    ("two Workers and no Scheduler", {S: DELETE}, [("spec.msReplicaSpecs[Scheduler]", "Required")]),
    ("one Worker alone is standalone", {S: DELETE, MW + ("replicas",): 1}, []),
    (
        "PS needs a Scheduler",
        {
            S: DELETE,
            MW + ("replicas",): 1,
            ("spec", "msReplicaSpecs", "PS"): {"template": {"spec": {"containers": [{"name": "mindspore", "image": "i"}]}}},
        },
        [("spec.msReplicaSpecs[Scheduler]", "Required")],
    ),
    ("no Worker", {MW: DELETE}, [("spec.msReplicaSpecs[Worker]", "Required")]),
    (
        "lower-case key is folded",
        {
            MW: DELETE,
            ("spec", "msReplicaSpecs", "worker"): {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "mindspore", "image": "i"}]}},
            },
        },
        [],
    ),
    (
        "two keys fold to Scheduler",
        {("spec", "msReplicaSpecs", "scheduler"): {"template": {"spec": {"containers": [{"name": "mindspore", "image": "i"}]}}}},
        [("spec.msReplicaSpecs[scheduler]", "Duplicate")],
    ),
    (
        "Master is not an MSJob type",
        {("spec", "msReplicaSpecs", "Master"): {}},
        [("spec.msReplicaSpecs[Master]", "NotSupported")],
    ),
    (
        "no mindspore container",
        {MW + CONTAINERS: NAMED_OTHER},
        [("spec.msReplicaSpecs[Worker].template.spec.containers", "Required")],
    ),
    (
        "empty image",
        {S + CONTAINERS + (0, "image"): ""},
        [("spec.msReplicaSpecs[Scheduler].template.spec.containers[0].image", "Required")],
    ),
    ("Worker replicas 0", {MW + ("replicas",): 0}, [("spec.msReplicaSpecs[Worker].replicas", "Forbidden")]),
    ("unknown successPolicy", {("spec", "successPolicy"): "AnyWorker"}, [("spec.successPolicy", "NotSupported")]),
    ("empty successPolicy is the default rule", {("spec", "successPolicy"): ""}, []),
    ("empty cleanPodPolicy", {RP + ("cleanPodPolicy",): ""}, [("spec.runPolicy.cleanPodPolicy", "NotSupported")]),
    ("suspend is PyTorchJob only", {RP + ("suspend",): True}, [("spec.runPolicy.suspend", "Forbidden")]),
    (
        "managedBy is PyTorchJob only",
        {RP + ("managedBy",): "kubeflow.org/training-operator"},
        [("spec.runPolicy.managedBy", "Forbidden")],
    ),
    ("enableDynamicWorker as string", {("spec", "enableDynamicWorker"): "yes"}, [("spec.enableDynamicWorker", "TypeInvalid")]),
    ("name too long for scheduler service", {("metadata", "name"): "m" * 52}, [("metadata.name", "Invalid")]),
]


@pytest.mark.parametrize("changes,expected", [c[1:] for c in MSJOB_CASES], ids=[c[0] for c in MSJOB_CASES])
def test_msjob_rules(msjob, mutate, changes, expected):
    assert pairs(mutate(msjob, changes)) == expected


def test_every_problem_is_reported_at_once(pytorchjob, mutate):
    bad = mutate(
        pytorchjob,
        {
            ("metadata", "name"): "Bad_Name",
            M + ("replicas",): 3,
            W + CONTAINERS + (0, "image"): "",
            RP + ("backoffLimit",): -1,
            ("spec", "nprocPerNode"): "lots",
        },
    )
    assert [str(e) for e in validate(bad)] == [
        "metadata.name: invalid value \"Bad_Name\": a DNS-1035 label must consist of lower case letters, "
        "digits or '-', start with a letter and end with a letter or digit",
        "spec.runPolicy.backoffLimit: must be greater than or equal to 0, not -1",
        'spec.nprocPerNode: invalid value "lots": must be auto, cpu, gpu or a positive integer',
        "spec.pytorchReplicaSpecs[Master].replicas: must be 1",
        "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image: must be required",
    ]


@pytest.mark.parametrize(
    "obj,message",
    [
        ([1, 2], "a job must be an object, not array [1, 2]"),
        ("text", 'a job must be an object, not string "text"'),
        (None, "a job must be an object, not null null"),
        ({"apiVersion": "v1", "kind": "Pod"}, 'kind: unsupported value "Pod"; supported values: "PyTorchJob", "MSJob"'),
        ({"apiVersion": "kubeflow.org/v1"}, "kind: Required value"),
        (
            {"apiVersion": "mindspore.gitee.com/v1", "kind": "PyTorchJob"},
            'apiVersion: unsupported value "mindspore.gitee.com/v1" for PyTorchJob; supported values: "kubeflow.org/v1"',
        ),
        ({"kind": "MSJob"}, "apiVersion: Required value"),
    ],
)
def test_not_a_training_job_is_one_line(obj, message):
    assert [str(e) for e in validate(obj)] == [message]


def test_missing_spec(pytorchjob):
    del pytorchjob["spec"]
    assert [str(e) for e in validate(pytorchjob)] == ["spec: Required value"]


@pytest.mark.parametrize(
    "old_policy,new_policy,expected",
    [
        ({}, {}, []),
        (
            {"managedBy": "kubeflow.org/training-operator"},
            {"managedBy": "kueue.x-k8s.io/multikueue"},
            [("spec.runPolicy.managedBy", "Invalid")],
        ),
        ({}, {"managedBy": "kueue.x-k8s.io/multikueue"}, [("spec.runPolicy.managedBy", "Invalid")]),
        (
            {"schedulingPolicy": {"queue": "a"}},
            {"schedulingPolicy": {"queue": "b"}},
            [("spec.runPolicy.schedulingPolicy.queue", "Invalid")],
        ),
        ({"schedulingPolicy": {"queue": "a"}}, {"schedulingPolicy": {"queue": "a"}}, []),
        ({}, {"schedulingPolicy": {"queue": "b"}}, []),
    ],
)
def test_update_rules(pytorchjob, mutate, old_policy, new_policy, expected):
    old = mutate(pytorchjob, {RP: old_policy})
    new = mutate(pytorchjob, {RP: new_policy})
    assert [(e.path, e.type) for e in validate(new, old)] == expected


def test_deprecated_nproc_is_a_warning_not_an_error(pytorchjob, mutate):
    job = mutate(pytorchjob, {EP: {"nProcPerNode": 2}})
    assert validate(job) == []
    assert warnings(job) == ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"]
    assert warnings(pytorchjob) == []


@pytest.mark.parametrize(
    "sample",
    sorted(path.name for path in (Path(__file__).parent / "samples").glob("*.yaml")),
)
def test_samples_are_valid(load_sample, sample):
    assert validate(load_sample(sample)) == []


def test_unknown_fields_are_named_with_their_paths_and_the_field_meant(load_sample, mutate):
    job = mutate(
        load_sample("pytorch_full.yaml"),
        {
            W + ("restartpolicy",): "Never",
            RP + ("schedulingPolicy", "Queue"): "x",
            ("status", "conditions", 0, "extra"): 1,
            W + ("template", "spec", "anyPodField"): 1,  # pod templates are passed through
        },
    )
    assert validate(job) == []
    assert warnings(job) == [
        'unknown field "spec.futureField"',
        'unknown field "spec.pytorchReplicaSpecs[Worker].restartpolicy"; did you mean "restartPolicy"?',
        'unknown field "spec.runPolicy.schedulingPolicy.Queue"; did you mean "queue"?',
        'unknown field "status.conditions[0].extra"',
    ]


def _nodes(obj, path=()):
    yield path
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _nodes(value, path + (key,))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _nodes(value, path + (i,))


ODD_VALUES = [None, True, 0, -1, 2**40, 1.5, "", "x", [], [None], {}, {"": None}, {1: 2}, [[["deep"]]]]


@pytest.mark.parametrize("sample", ["pytorch_full.yaml", "pytorch_elastic_hpa.yaml", "msjob_ps.yaml"])
def test_validation_and_parsing_are_total(load_sample, sample):
    """Every node of a sample replaced by every odd value: never an exception, never silence."""
    from trainctl.api.errors import JobInvalid
    from trainctl.api.loader import parse_job

    base = load_sample(sample)
    for path in list(_nodes(base))[1:]:
        for value in ODD_VALUES:
            job = _replace(base, path, value)
            errors = validate(job)
            assert set(errors) <= set(validate(job, pod_templates=True)), (path, value)
            warnings(job)
            try:
                parse_job(job)
            except JobInvalid as exc:
                assert exc.errors, path
                assert errors, (path, value)  # a job that cannot be parsed is never valid


def test_pod_template_rules_are_asked_for_by_a_check_before_submitting(load_sample, mutate):
    """The controller, as the reference, leaves a pod the API server refuses to a FailedCreatePod Event."""
    job = mutate(load_sample("pytorch_full.yaml"), {W + CONTAINERS + (0, "resources"): {"limits": {"cpu": "lots"}}})
    assert validate(job) == []
    assert [(e.path, e.detail) for e in validate(job, pod_templates=True)] == [(
        "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].resources.limits[cpu]",
        "Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    )]


def _replace(obj, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {**obj, head: _replace(obj[head], rest, value)}
    return [_replace(v, rest, value) if i == head else v for i, v in enumerate(obj)]


def test_a_liveness_probe_kube_would_refuse_is_found_before_submitting(load_sample, mutate):
    probe = {"exec": {"command": ["true"]}, "tcpSocket": {"port": 29500}, "successThreshold": 2}
    job = mutate(load_sample("pytorch_full.yaml"), {W + CONTAINERS + (0, "livenessProbe"): probe})
    path = "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].livenessProbe"
    assert [(e.path, e.detail) for e in validate(job, pod_templates=True)] == [
        (f"{path}.tcpSocket", "Forbidden: may not specify more than 1 handler type"),
        (f"{path}.successThreshold", "Invalid value: 2: must be 1"),
    ]
