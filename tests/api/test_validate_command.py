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
