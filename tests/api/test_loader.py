"""Reading YAML streams and parsing jobs: one line per problem, never a traceback."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from trainctl.api import MSJob, PyTorchJob, default_job
from trainctl.api.errors import JobInvalid
from trainctl.api.loader import DocumentsInvalid, load_documents, parse_job, read_documents

# Every sample in tests/api/samples, so a new one is covered without being listed.
SAMPLES = sorted(path.name for path in (Path(__file__).parent / "samples").glob("*.yaml"))


@pytest.mark.parametrize("sample", SAMPLES)
def test_round_trip_is_exact(load_sample, sample):
    obj = load_sample(sample)
    job = parse_job(obj)
    assert isinstance(job, PyTorchJob if obj["kind"] == "PyTorchJob" else MSJob)
    assert job.dump() == obj


@pytest.mark.parametrize("sample", SAMPLES)
def test_defaulting_leaves_the_parsed_job_and_its_source_alone(load_sample, sample):
    obj = load_sample(sample)
    snapshot = copy.deepcopy(obj)
    job = parse_job(obj)
    defaulted = default_job(job).dump()
    assert obj == snapshot
    assert job.dump() == snapshot
    assert defaulted != snapshot


def test_timestamps_stay_strings(load_sample):
    obj = load_sample("pytorch_full.yaml")
    assert obj["metadata"]["creationTimestamp"] == "2025-01-02T03:04:05Z"
    assert obj["status"]["conditions"][0]["lastTransitionTime"] == "2025-01-02T03:04:05Z"


def test_multi_document_stream():
    text = "---\na: 1\n---\n# only a comment\n---\nb: 2\n...\n"
    assert load_documents(text) == [{"a": 1}, {"b": 2}]


def test_every_bad_document_is_one_line_and_the_good_ones_survive():
    text = "\n".join(
        [
            "kind: A",  # 1
            "---",  # 2
            "- a list",  # 3
            "---",  # 4
            "spec: [1, 2",  # 5
            "---",  # 6
            "spec:",  # 7
            "  Master: {}",  # 8
            "  Master: {}",  # 9
            "---",  # 10
            "plain scalar",  # 11
            "---",  # 12
            "kind: B",  # 13
        ]
    )
    docs = read_documents(text)
    assert [d.obj for d in docs] == [{"kind": "A"}, None, None, None, None, {"kind": "B"}]
    with pytest.raises(DocumentsInvalid) as info:
        load_documents(text)
    assert info.value.problems == [
        'document 2 (line 2): expected a Kubernetes object (a mapping), got array ["a list"]',
        "document 3 (line 4): line 5, column 12: while parsing a flow sequence: expected ',' or ']', but got '<stream end>'",
        'document 4 (line 6): line 9, column 3: duplicate key "Master"',
        'document 5 (line 10): expected a Kubernetes object (a mapping), got string "plain scalar"',
    ]


def test_tab_indentation_is_a_clear_error():
    with pytest.raises(DocumentsInvalid) as info:
        load_documents("spec:\n\treplicas: 1\n")
    [problem] = info.value.problems
    assert problem.startswith("document 1 (line 1): line 2, column 1: ")


def test_parse_job_reports_type_errors_with_kubernetes_paths(load_sample):
    obj = load_sample("pytorch_mnist.yaml")
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "2"
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"minResources": {"cpu": 1.5}}}
    obj["status"] = {"conditions": [{"type": "Created"}]}
    with pytest.raises(JobInvalid) as info:
        parse_job(obj)
    assert [str(e) for e in info.value.errors] == [
        'spec.pytorchReplicaSpecs[Worker].replicas: must be an integer, not string "2"',
        "spec.runPolicy.schedulingPolicy.minResources[cpu]: must be an integer or a string, not number 1.5",
        "status.conditions[0].status: Required value",
    ]


@pytest.mark.parametrize(
    "obj",
    [
        None,
        42,
        "PyTorchJob",
        [],
        {},
        {"kind": ["PyTorchJob"], "apiVersion": "kubeflow.org/v1"},
        {"kind": "PyTorchJob", "apiVersion": "kubeflow.org/v1", "spec": None},
        {"kind": "PyTorchJob", "apiVersion": "kubeflow.org/v1", "spec": {"pytorchReplicaSpecs": {("a",): 1}}},
        {"kind": "MSJob", "apiVersion": "mindspore.gitee.com/v1", "spec": {"msReplicaSpecs": {1: None, None: []}}},
        {"kind": "MSJob", "apiVersion": "mindspore.gitee.com/v1", "metadata": {"name": 7}, "spec": []},
    ],
)
def test_parse_job_is_total(obj):
    with pytest.raises(JobInvalid) as info:
        parse_job(obj)
    assert info.value.errors and all(str(e) for e in info.value.errors)


def test_self_referencing_yaml_is_one_line():
    text = "kind: PyTorchJob\nspec: &s\n  pytorchReplicaSpecs: {Worker: *s}\n---\na: &x [1]\nb: *x\n"
    with pytest.raises(DocumentsInvalid) as info:
        load_documents(text)
    assert info.value.problems == [
        "document 1 (line 1): an alias (*name) refers to a node that contains it; JSON cannot hold a cycle"
    ]


def test_json_documents_may_be_indented_with_tabs():
    assert load_documents('{\n\t"kind": "PyTorchJob",\n\t"spec": {}\n}\n') == [{"kind": "PyTorchJob", "spec": {}}]


@pytest.mark.parametrize(
    "text,problem",
    [
        ('{"kind": "A", "kind": "B"}', 'document 1 (line 1): duplicate key "kind"'),
        ("[1, 2]", "document 1 (line 1): expected a Kubernetes object (a mapping), got array [1, 2]"),
    ],
)
def test_bad_json_is_one_line(text, problem):
    with pytest.raises(DocumentsInvalid) as info:
        load_documents(text)
    assert info.value.problems == [problem]


def test_yaml_flow_mapping_is_still_yaml():
    assert load_documents("{kind: PyTorchJob, spec: {}}") == [{"kind": "PyTorchJob", "spec": {}}]
