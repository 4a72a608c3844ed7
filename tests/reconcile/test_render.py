"""``trainctl render``: what it prints for good input, and validate's errors for bad input."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from trainctl.cli.main import main

from tests.support.jobs import msjob, pytorchjob

METRICS = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]


def write(tmp_path, *objects, name="job.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return str(path)


def render(capsys, *argv):
    code = main(["render", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def kinds_and_names(text):
    return [(o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(text)]


def test_render_pytorchjob_prints_pods_then_services(tmp_path, capsys):
    job = pytorchjob("mnist", workers=2)
    del job["metadata"]["uid"]  # a manifest, not an object read back from a cluster
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["command"] = ["python", "train.py"]
    code, out, err = render(capsys, "-f", write(tmp_path, job))
    assert (code, err) == (0, "")
    assert kinds_and_names(out) == [
        ("Pod", "mnist-master-0"), ("Pod", "mnist-worker-0"), ("Pod", "mnist-worker-1"),
        ("Service", "mnist-master-0"), ("Service", "mnist-worker-0"), ("Service", "mnist-worker-1"),
    ]
    assert "&id" not in out and "*id" not in out  # shared sub-structures are printed in full
    worker = list(yaml.safe_load_all(out))[2]
    env = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0]["env"]}
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("2", "3", "mnist-master-0")
    assert worker["spec"]["initContainers"][0]["name"] == "init-pytorch"
    assert worker["metadata"]["ownerReferences"][0]["uid"] == "<job-uid>"


def test_render_msjob_shows_pods_with_the_placeholder_scheduler_ip(tmp_path, capsys):
    code, out, _ = render(capsys, "-f", write(tmp_path, msjob("ms", workers=1)))
    assert code == 0
    assert kinds_and_names(out) == [("Pod", "ms-scheduler-0"), ("Pod", "ms-worker-0"), ("Service", "ms-scheduler-0")]
    worker = list(yaml.safe_load_all(out))[1]
    assert {"name": "MS_SCHED_HOST", "value": "192.0.2.10"} in worker["spec"]["containers"][0]["env"]


def test_render_elastic_job_with_hpa_store_and_volcano(tmp_path, capsys):
    job = pytorchjob("el", master=False, workers=2)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3, "metrics": METRICS}
    code, out, _ = render(capsys, "--gang-scheduler", "volcano", "-f", write(tmp_path, job))
    assert code == 0
    assert kinds_and_names(out) == [
        ("Pod", "el-rdzv"), ("Pod", "el-worker-0"), ("Pod", "el-worker-1"),
        ("Service", "el-worker-0"), ("Service", "el-worker-1"), ("Service", "el-rdzv"),
        ("HorizontalPodAutoscaler", "el"), ("PodGroup", "el"),
    ]


def test_the_rendezvous_store_runs_at_its_workers_priority(tmp_path, capsys):
    """Preemption takes the lowest-priority pods first: a store below its workers would go first."""
    job = pytorchjob("el", master=False, workers=2)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = "batch-low"
    _, out, _ = render(capsys, "-f", write(tmp_path, job))
    store = next(o for o in yaml.safe_load_all(out) if o["metadata"]["name"] == "el-rdzv")
    assert store["spec"]["priorityClassName"] == "batch-low"


def test_rendered_objects_pass_the_kubernetes_schema(tmp_path, capsys):
    job = pytorchjob("el", master=False, workers=2)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3, "metrics": METRICS}
    _, out, _ = render(capsys, "-f", write(tmp_path, job, pytorchjob("mnist"), msjob("ms", ps=1)))
    objects = list(yaml.safe_load_all(out))
    assert len(objects) == 18
    for obj in objects:
        if obj["kind"] != "PodGroup":
            kubernetes_validate.validate(obj, "1.30.0", strict=True)


@pytest.mark.parametrize(
    "text",
    [
        "kind: PyTorchJob\napiVersion: kubeflow.org/v1\nmetadata: {name: Bad_Name}\n"
        "spec:\n  pytorchReplicaSpecs:\n    Master:\n      template: {spec: {containers: [{name: pytorch, image: ''}]}}\n",
        "kind: [unclosed\n",
        "kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\n",
    ],
)
def test_bad_input_gives_validates_errors_and_no_yaml(tmp_path, capsys, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, out, err = render(capsys, "-f", str(path))
    assert code == 1 and out == ""
    assert main(["validate", "-f", str(path)]) == 1
    _, validate_err = capsys.readouterr()
    assert err == validate_err and err.strip() and "Traceback" not in err


def test_unknown_fields_stop_render_as_validate_unless_validate_warn(tmp_path, capsys):
    job = pytorchjob("typo", workers=1, namespace=None, uid=None)
    job["spec"]["runPolicy"] = {"backofLimit": 1}
    path = write(tmp_path, job)
    code, out, err = render(capsys, "-f", path)
    assert code == 1 and out == ""
    assert err == 'PyTorchJob/typo: unknown field "spec.runPolicy.backofLimit"; did you mean "backoffLimit"?\n'
    code, out, err = render(capsys, "--validate=warn", "-f", path)
    assert code == 0 and ("Pod", "typo-master-0") in kinds_and_names(out)
    assert err == 'PyTorchJob/typo: warning: unknown field "spec.runPolicy.backofLimit"; did you mean "backoffLimit"?\n'


def test_missing_file_is_one_line(tmp_path, capsys):
    code, out, err = render(capsys, "-f", str(tmp_path / "nope.yaml"))
    assert code == 1 and out == "" and err.count("\n") == 1 and "cannot read" in err


def test_generate_name_gets_a_placeholder_suffix(tmp_path, capsys):
    job = msjob("ms", workers=1)
    job["metadata"] = {"generateName": "ms-"}
    code, out, _ = render(capsys, "-f", write(tmp_path, job))
    assert code == 0
    assert kinds_and_names(out) == [
        ("Pod", "ms-xxxxx-scheduler-0"),
        ("Pod", "ms-xxxxx-worker-0"),
        ("Service", "ms-xxxxx-scheduler-0"),
    ]
