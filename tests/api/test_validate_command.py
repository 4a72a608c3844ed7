"""``trainctl validate``: exit status and one line per problem, through the real CLI entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainctl.cli.main import main

SAMPLES = Path(__file__).parent / "samples"

BAD = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: bad
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 2
      template:
        spec:
          containers:
            - name: pytorch
              image: img
"""


def test_valid_files_exit_zero(capsys):
    files = ["pytorch_mnist.yaml", "msjob_ps.yaml"]
    assert main(["validate", *[arg for f in files for arg in ("-f", str(SAMPLES / f))]]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["PyTorchJob/mnist is valid", "MSJob/ms-widedeep-ps is valid"]
    assert err == ""


def test_each_problem_on_its_own_line(tmp_path, capsys):
    manifest = tmp_path / "jobs.yaml"
    manifest.write_text(
        BAD
        + "---\n"
        + (SAMPLES / "msjob_standalone.yaml").read_text()
        + "---\n[1, 2]\n---\nkind: Pod\napiVersion: v1\nmetadata: {name: p}\n"
    )
    assert main(["validate", "-f", str(manifest)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == ["MSJob/ms-widedeep-standalone is valid"]
    assert err.splitlines() == [
        "PyTorchJob/bad: spec.pytorchReplicaSpecs[Master].replicas: must be 1",
        f"{manifest}: document 3 (line 30): expected a Kubernetes object (a mapping), got array [1, 2]",
        'Pod/p: kind: unsupported value "Pod"; supported values: "PyTorchJob", "MSJob"',
    ]


def test_deprecation_is_a_warning(tmp_path, capsys):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        (SAMPLES / "pytorch_elastic.yaml").read_text().replace("maxRestarts: 100", "maxRestarts: 100\n    nProcPerNode: 2")
    )
    assert main(["validate", "-f", str(manifest)]) == 0
    out, err = capsys.readouterr()
    assert out == "PyTorchJob/elastic is valid\n"
    assert err == "PyTorchJob/elastic: warning: spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead\n"


@pytest.mark.parametrize(
    "content,message",
    [
        ("", "no objects found"),
        ("a: [", "document 1 (line 1): line 1, column 5: while parsing a flow node: "
                 "expected the node content, but found '<stream end>'"),
    ],
)
def test_empty_and_broken_files(tmp_path, capsys, content, message):
    manifest = tmp_path / "x.yaml"
    manifest.write_text(content)
    assert main(["validate", "-f", str(manifest)]) == 1
    assert capsys.readouterr().err == f"{manifest}: {message}\n"


def test_missing_file(tmp_path, capsys):
    assert main(["validate", "-f", str(tmp_path / "none.yaml")]) == 1
    assert capsys.readouterr().err == f"{tmp_path / 'none.yaml'}: cannot read: No such file or directory\n"


def test_stdin_through_the_console_script():
    result = subprocess.run(
        [sys.executable, "-m", "trainctl.cli.main", "validate", "-f", "-"],
        input=BAD.encode(),
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr.decode() == "PyTorchJob/bad: spec.pytorchReplicaSpecs[Master].replicas: must be 1\n"


TEMPLATE_PROBLEMS = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pods
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        metadata:
          labels: {"bad key!": x}
        spec:
          containers:
            - name: pytorch
              image: img
              resources: {limits: {cpu: lots, memory: 1Gi}, requests: {memory: 2Gi}}
              ports: [{containerPort: 70000}, {name: http}]
              env: [{name: "A=B"}, {value: x}]
            - name: Side_car
              image: img
          volumes: [{emptyDir: {}}]
"""


def test_pod_templates_are_checked_as_the_api_server_checks_pods(tmp_path, capsys):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(TEMPLATE_PROBLEMS)
    assert main(["validate", "-f", str(manifest)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    worker = "PyTorchJob/pods: spec.pytorchReplicaSpecs[Worker].template"
    container = f"{worker}.spec.containers[0]"
    lines = err.splitlines()
    assert lines[:1] == [f"{worker}.metadata.labels: Invalid value: \"bad key!\": name part must consist of alphanumeric "
                         "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                         "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                         "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
                         "(e.g. 'example.com/MyName')"]
    assert lines[1:] == [
        f"{container}.resources.requests[memory]: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi",
        f"{container}.resources.limits[cpu]: Invalid value: \"lots\": quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        f"{container}.ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        f"{container}.ports[1].containerPort: Required value",
        f"{container}.env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of "
        "printable ASCII characters other than '='",
        f"{container}.env[1].name: Required value",
        f"{worker}.spec.containers[1].name: Invalid value: \"Side_car\": a lowercase RFC 1123 label must consist of "
        "lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
        "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        f"{worker}.spec.volumes[0].name: Required value",
    ]


def test_a_template_the_api_server_accepts_for_pods_is_valid(tmp_path, capsys):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(TEMPLATE_PROBLEMS.replace("lots", "500m").replace("2Gi", "1Gi").replace("70000", "8080")
                        .replace("{name: http}", "{name: http, containerPort: 80}").replace("A=B", "A_B")
                        .replace("{value: x}", "{name: B, value: x}").replace("Side_car", "side-car")
                        .replace("{emptyDir: {}}", "{name: scratch, emptyDir: {}}").replace("bad key!", "app"))
    assert main(["validate", "-f", str(manifest)]) == 0
    assert capsys.readouterr() == ("PyTorchJob/pods is valid\n", "")


TYPOS = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: typos
spec:
  runPolicy:
    backofLimit: 3
  pytorchReplicaSpecs:
    Worker:
      restartPolicyy: Never
      template:
        spec:
          podFieldFromTheFuture: 1
          containers:
            - name: pytorch
              image: img
"""
TYPO_LINES = [
    'unknown field "spec.pytorchReplicaSpecs[Worker].restartPolicyy"; did you mean "restartPolicy"?',
    'unknown field "spec.runPolicy.backofLimit"; did you mean "backoffLimit"?',
]


@pytest.mark.parametrize("flag", [[], ["--validate"], ["--validate=strict"], ["--validate=true"]])
def test_unknown_fields_are_errors_by_default_as_kubectl_apply_has_them(tmp_path, capsys, flag):
    """Pod templates keep unknown fields (the CRD preserves them), so none is reported there."""
    manifest = tmp_path / "job.yaml"
    manifest.write_text(TYPOS)
    assert main(["validate", *flag, "-f", str(manifest)]) == 1
    assert capsys.readouterr() == ("", "".join(f"PyTorchJob/typos: {line}\n" for line in TYPO_LINES))


def test_unknown_fields_can_be_warnings_or_ignored(tmp_path, capsys):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(TYPOS)
    assert main(["validate", "--validate=warn", "-f", str(manifest)]) == 0
    assert capsys.readouterr() == ("PyTorchJob/typos is valid\n",
                                   "".join(f"PyTorchJob/typos: warning: {line}\n" for line in TYPO_LINES))
    for mode in ("ignore", "false"):
        assert main(["validate", f"--validate={mode}", "-f", str(manifest)]) == 0
        assert capsys.readouterr() == ("PyTorchJob/typos is valid\n", "")


def test_an_unknown_validate_mode_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["validate", "--validate=maybe", "-f", "-"])
    assert exited.value.code == 2
    assert "must be one of: strict (or true), warn, ignore (or false)" in capsys.readouterr().err


@pytest.mark.parametrize("misplaced,where", [
    ("      template:\n        containers:\n", "spec.pytorchReplicaSpecs[Worker].template.containers"),
    ("      containers:\n", "spec.pytorchReplicaSpecs[Worker].containers"),
])
def test_a_containers_list_written_too_shallow_says_where_it_was_found(tmp_path, capsys, misplaced, where):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: shallow}\nspec:\n  pytorchReplicaSpecs:\n"
        "    Worker:\n" + misplaced + "          - {name: pytorch, image: img}\n"
    )
    assert main(["validate", "--validate=ignore", "-f", str(manifest)]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "PyTorchJob/shallow: spec.pytorchReplicaSpecs[Worker].template.spec.containers: must be specified; "
        f"found `containers` at {where}; it belongs under template.spec")


def test_a_count_outside_the_elastic_range_names_the_count(tmp_path, capsys):
    """The server's CRD rule words it as kube does (Invalid value: "object"); offline, the count is named."""
    manifest = tmp_path / "job.yaml"
    manifest.write_text((SAMPLES / "pytorch_elastic.yaml").read_text())
    job = manifest.read_text()
    assert "maxReplicas: 3" in job
    manifest.write_text(job.replace("maxReplicas: 3", "maxReplicas: 1"))
    assert main(["validate", "-f", str(manifest)]) == 1
    assert capsys.readouterr().err == ("PyTorchJob/elastic: spec.pytorchReplicaSpecs[Worker].replicas: Invalid value: 2: "
                                       "must be between minReplicas (1) and maxReplicas (1), not 2\n")
