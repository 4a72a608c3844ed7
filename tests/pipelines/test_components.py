"""The pipeline components and the sample pipeline compile with the real kfp, and agree with the entry point."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kfp import compiler

from trainctl.pipelines import launch as entry
from trainctl.pipelines.components import ENTRY_POINT, TRAINCTL_IMAGE, msjob_launcher, pytorchjob_launcher

from tests.support.repo import REPO

CONCAT = re.compile(r"^--([a-z-]+)=\{\{\$\.(inputs|outputs)\.parameters\['(\w+)'\](\.output_file)?\}\}$")


def compiled(component, tmp_path: Path) -> dict:
    path = tmp_path / "component.yaml"
    compiler.Compiler().compile(component, str(path))
    text = path.read_text()
    assert text.startswith("# PIPELINE DEFINITION")
    return yaml.safe_load(text)


def component_spec(spec: dict) -> tuple[dict, dict]:
    (component,) = spec["components"].values()
    (executor,) = spec["deploymentSpec"]["executors"].values()
    return component, executor["container"]


COMMON_INPUTS = {
    "name": ("STRING", ""),
    "namespace": ("STRING", ""),
    "manifest": ("STRING", ""),
    "image": ("STRING", ""),
    "command": ("LIST", []),
    "args": ("LIST", []),
    "replicas": ("NUMBER_INTEGER", 1),
    "cpu": ("STRING", ""),
    "memory": ("STRING", ""),
    "gpus": ("NUMBER_INTEGER", 0),
    "npus": ("NUMBER_INTEGER", 0),
    "port": ("NUMBER_INTEGER", 0),
    "timeout_seconds": ("NUMBER_INTEGER", 0),
    "delete_when_done": ("BOOLEAN", True),
}
PYTORCH_ONLY = {
    "min_replicas": ("NUMBER_INTEGER", 0),
    "max_replicas": ("NUMBER_INTEGER", 0),
    "nproc_per_node": ("STRING", ""),
}


@pytest.mark.parametrize(
    ("component", "kind", "inputs"),
    [
        (pytorchjob_launcher, "PyTorchJob", {**COMMON_INPUTS, **PYTORCH_ONLY}),
        (msjob_launcher, "MSJob", COMMON_INPUTS),
    ],
    ids=["pytorchjob", "msjob"],
)
def test_component_compiles_with_its_inputs_outputs_image_and_command(component, kind, inputs, tmp_path):
    component_def, container = component_spec(compiled(component, tmp_path))

    params = component_def["inputDefinitions"]["parameters"]
    assert {name: (p["parameterType"], p["defaultValue"]) for name, p in params.items()} == inputs
    assert all(p["isOptional"] for p in params.values())
    outputs = component_def["outputDefinitions"]["parameters"]
    assert {name: p["parameterType"] for name, p in outputs.items()} == {"condition": "STRING", "status": "STRUCT"}

    assert container["image"] == TRAINCTL_IMAGE
    assert container["command"] == ENTRY_POINT == ["python", "-m", "trainctl.pipelines.launch"]
    args = container["args"]
    assert args[0] == f"--kind={kind}"
    wired: dict[str, str] = {}
    for arg in args[1:]:
        parts = yaml.safe_load(arg)["Concat"]  # kfp's concat placeholder, as JSON
        flag, placeholder = parts
        match = CONCAT.match(flag + placeholder)
        assert match, arg
        wired[match.group(3)] = match.group(1)
    # Every input and output reaches the entry point, under a flag the entry point accepts.
    assert set(wired) == set(inputs) | {"condition", "status"}
    accepted = {opt for action in entry.build_parser()._actions for opt in action.option_strings}
    assert {f"--{flag}" for flag in wired.values()} <= accepted


def test_sample_pipeline_compiles_offline(tmp_path):
    out = tmp_path / "pipeline.yaml"
    done = subprocess.run(
        [sys.executable, str(REPO / "samples" / "pipelines" / "train_and_check.py"), str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load(out.read_text())
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"pytorchjob-launcher", "msjob-launcher"}
    assert tasks["msjob-launcher"]["dependentTasks"] == ["pytorchjob-launcher"]
    assert all(task["cachingOptions"] == {} for task in tasks.values())  # caching off: launches have effects
    train = tasks["pytorchjob-launcher"]["inputs"]["parameters"]
    assert train["command"]["runtimeValue"]["constant"] == ["python", "samples/pytorch/train.py"]
    assert train["replicas"] == {"componentInputParameter": "workers"}
    check = tasks["msjob-launcher"]["inputs"]["parameters"]
    manifest = yaml.safe_load(check["manifest"]["runtimeValue"]["constant"])
    assert manifest["kind"] == "MSJob"
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert images == {TRAINCTL_IMAGE}
