"""Every sample job is valid and has the shape issue 6 asks for.

A sample must be applicable as it is: it parses as YAML and as our wire model, its pod
templates are valid Kubernetes PodSpecs, its command names a script that exists relative
to the repository root (the working directory of a pod, here and in the sample image),
and the flags it passes are flags that script accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from trainctl.api import MSJob, PyTorchJob, default_job

from tests.support.repo import REPO

SAMPLES = REPO / "samples"
MANIFESTS = sorted(p for p in SAMPLES.rglob("*.yaml") if "pipelines" not in p.relative_to(SAMPLES).parts)
KUBERNETES_VERSION = "1.32"


def load(relative: str) -> dict[str, Any]:
    (doc,) = yaml.safe_load_all((SAMPLES / relative).read_text())
    return doc


def replicas(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return job["spec"].get("pytorchReplicaSpecs") or job["spec"]["msReplicaSpecs"]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec["template"]["spec"]["containers"]


def command_line(container: dict[str, Any]) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def script_and_flags(argv: list[str]) -> tuple[str, list[str]]:
    """The .py script a command runs (directly, via torchrun or python -m ...run) and its flags."""
    index = next(i for i, word in enumerate(argv) if word.endswith(".py"))
    return argv[index], argv[index + 1:]


def test_there_are_samples_for_every_kind_asked_for():
    names = {p.relative_to(SAMPLES).as_posix() for p in MANIFESTS}
    assert {"pytorch/ddp.yaml", "pytorch/elastic.yaml", "pytorch/exitcode.yaml",
            "mindspore/msjob-cpu.yaml", "mindspore/msjob-ascend.yaml", "mindspore/msjob-gpu.yaml",
            "kubeflow/pytorch-mnist-gloo.yaml", "kubeflow/pytorch-elastic-mnist.yaml"} <= names


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.relative_to(SAMPLES).as_posix())
def test_sample_is_a_valid_job(path: Path):
    docs = list(yaml.safe_load_all(path.read_text()))
    assert len(docs) == 1
    job = docs[0]
    model = {"PyTorchJob": PyTorchJob, "MSJob": MSJob}[job["kind"]]
    parsed = model.parse(job)
    assert parsed.dump() == job
    default_job(parsed)
    for replica_type, spec in replicas(job).items():
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sample"}, "spec": spec["template"]["spec"]}
        try:
            kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{replica_type} pod template: {e.message}")


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.relative_to(SAMPLES).as_posix())
def test_sample_runs_a_script_of_this_repository(path: Path):
    job = yaml.safe_load(path.read_text())
    for spec in replicas(job).values():
        for container in containers(spec):
            script, _ = script_and_flags(command_line(container))
            assert not Path(script).is_absolute(), "relative to the working directory: the repo root or the image's WORKDIR"
            assert (REPO / script).is_file(), script


PYTORCH_SAMPLES = ["pytorch/ddp.yaml", "pytorch/elastic.yaml", "pytorch/exitcode.yaml"]


@pytest.mark.parametrize("relative", PYTORCH_SAMPLES)
def test_pytorch_sample_flags_are_accepted_by_the_training_script(train, relative):
    for spec in replicas(load(relative)).values():
        (container,) = containers(spec)
        script, flags = script_and_flags(command_line(container))
        assert script == "samples/pytorch/train.py"
        args = train.parse_args(flags)
        assert args.checkpoint_dir == Path("checkpoints") / load(relative)["metadata"]["name"]


def test_static_ddp_has_a_master_and_two_workers():
    job = load("pytorch/ddp.yaml")
    specs = replicas(job)
    assert {k: v["replicas"] for k, v in specs.items()} == {"Master": 1, "Worker": 2}
    assert "elasticPolicy" not in job["spec"]
    for spec in specs.values():
        (container,) = containers(spec)
        assert container["name"] == "pytorch"
        assert container["command"][:2] == ["python", "samples/pytorch/train.py"]


def test_elastic_job_scales_between_one_and_three_workers_with_torchrun():
    job = load("pytorch/elastic.yaml")
    spec = job["spec"]
    assert set(replicas(job)) == {"Worker"} and replicas(job)["Worker"]["replicas"] == 2
    elastic = spec["elasticPolicy"]
    assert (elastic["minReplicas"], elastic["maxReplicas"], elastic["rdzvBackend"]) == (1, 3, "c10d")
    assert elastic["maxRestarts"] >= 3
    assert elastic["metrics"][0]["resource"]["name"] == "cpu"
    # One process per pod: "auto" would start one per CPU core.
    assert spec["nprocPerNode"] == "1"
    (container,) = containers(replicas(job)["Worker"])
    assert container["name"] == "pytorch"
    assert container["command"][0] == "torchrun"
    env = {e["name"]: e for e in container["env"]}
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"]["value"] == "1"
    assert env["PET_LOCAL_ADDR"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # The HPA needs a CPU request to compute utilisation.
    assert container["resources"]["requests"]["cpu"]


def test_elastic_job_runs_long_enough_to_look_at_and_serves_its_status_on_the_declared_port(train, monkeypatch):
    """The README's exec and port-forward meet a running pod with something listening on 8080."""
    (container,) = containers(replicas(load("pytorch/elastic.yaml"))["Worker"])
    for variable in container["env"]:
        if "value" in variable:
            monkeypatch.setenv(variable["name"], variable["value"])
    args = train.parse_args(script_and_flags(command_line(container))[1])
    assert args.steps * args.step_sleep >= 120, "minutes of training, not seconds"
    assert {"name": "status", "containerPort": args.status_port} in container["ports"]
    assert args.status_port == 8080


def test_exitcode_job_retries_a_killed_worker_once(train):
    job = load("pytorch/exitcode.yaml")
    specs = replicas(job)
    assert {k: v["replicas"] for k, v in specs.items()} == {"Master": 1, "Worker": 2}
    assert {spec["restartPolicy"] for spec in specs.values()} == {"ExitCode"}
    (worker,) = containers(specs["Worker"])
    (fault,) = train.parse_faults({e["name"]: e["value"] for e in worker["env"]}["INJECT_FAULT"])
    # RANK 2 is Worker index 1; 137 is one of the retryable exit codes.
    assert (fault.rank, fault.exit_code) == (2, 137)
    for spec in specs.values():
        (container,) = containers(spec)
        args = train.parse_args(script_and_flags(command_line(container))[1])
        assert args.peer_failure_exit_code in (130, 137, 143, 138)
        assert fault.step > args.checkpoint_every, "the fault comes after a checkpoint, so the retry resumes"


@pytest.mark.parametrize("relative", ["mindspore/msjob-cpu.yaml", "mindspore/msjob-ascend.yaml", "mindspore/msjob-gpu.yaml"])
def test_msjob_has_a_scheduler_and_two_workers_running_the_same_script(relative):
    specs = replicas(load(relative))
    assert {k: v["replicas"] for k, v in specs.items()} == {"Scheduler": 1, "Worker": 2}
    for spec in specs.values():
        (container,) = containers(spec)
        assert container["name"] == "mindspore"
        assert script_and_flags(command_line(container))[0] == "samples/mindspore/train.py"


def device_target(container: dict[str, Any]) -> str:
    _, flags = script_and_flags(command_line(container))
    return flags[flags.index("--device-target") + 1]


def test_cpu_msjob_asks_for_no_accelerator():
    for spec in replicas(load("mindspore/msjob-cpu.yaml")).values():
        (container,) = containers(spec)
        assert device_target(container) == "CPU"
        limits = container.get("resources", {}).get("limits", {})
        assert not any("/" in name for name in limits)


def test_ascend_msjob_requests_npus_and_mounts_the_driver():
    specs = replicas(load("mindspore/msjob-ascend.yaml"))
    (worker,) = containers(specs["Worker"])
    assert device_target(worker) == "Ascend"
    resources = worker["resources"]
    assert resources["limits"]["huawei.com/Ascend910"] == resources["requests"]["huawei.com/Ascend910"]
    volumes = {v["name"]: v for v in specs["Worker"]["template"]["spec"]["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in worker["volumeMounts"]}
    host_paths = {volumes[name]["hostPath"]["path"]: path for name, path in mounts.items() if "hostPath" in volumes[name]}
    assert host_paths["/usr/local/Ascend/driver"] == "/usr/local/Ascend/driver"
    (scheduler,) = containers(specs["Scheduler"])
    assert "huawei.com/Ascend910" not in scheduler.get("resources", {}).get("limits", {})


def test_gpu_msjob_requests_one_gpu_per_worker():
    specs = replicas(load("mindspore/msjob-gpu.yaml"))
    (worker,) = containers(specs["Worker"])
    assert device_target(worker) == "GPU"
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    (scheduler,) = containers(specs["Scheduler"])
    assert "nvidia.com/gpu" not in scheduler.get("resources", {}).get("limits", {})


@pytest.mark.parametrize("relative", ["kubeflow/pytorch-mnist-gloo.yaml", "kubeflow/pytorch-elastic-mnist.yaml"])
def test_kubeflow_samples_use_nothing_specific_to_trainctl(mnist, relative):
    job = load(relative)
    # Only the image name (the sample image) may say trainctl: no labels, annotations, env.
    assert "trainctl" not in yaml.safe_dump(job).replace("image: trainctl/samples:", "")
    for spec in replicas(job).values():
        (container,) = containers(spec)
        assert container["name"] == "pytorch"
        argv = command_line(container)
        script, flags = script_and_flags(argv)
        assert script == "samples/kubeflow/mnist.py"
        assert argv[0] == "python"


def test_kubeflow_elastic_sample_uses_the_deprecated_nproc_field_as_people_do():
    spec = load("kubeflow/pytorch-elastic-mnist.yaml")["spec"]
    assert spec["elasticPolicy"]["nProcPerNode"] == 1 and "nprocPerNode" not in spec
    (container,) = containers(spec["pytorchReplicaSpecs"]["Worker"])
    assert container["command"][:3] == ["python", "-m", "torch.distributed.run"]


def test_mnist_flags_in_the_kubeflow_samples_are_accepted(mnist, capsys, monkeypatch):
    for name in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    for relative in ["kubeflow/pytorch-mnist-gloo.yaml", "kubeflow/pytorch-elastic-mnist.yaml"]:
        for spec in replicas(load(relative)).values():
            (container,) = containers(spec)
            _, flags = script_and_flags(command_line(container))
            assert mnist.main([*flags, "--samples=64"]) == 0
    out = capsys.readouterr().out
    assert "[done] epochs=1" in out


def test_readme_mentions_every_sample():
    readme = (SAMPLES / "README.md").read_text()
    for path in MANIFESTS:
        assert path.relative_to(SAMPLES).as_posix() in readme, path


def test_dockerfile_puts_the_samples_under_workspace():
    lines = [line.split() for line in (SAMPLES / "Dockerfile").read_text().splitlines() if line and not line.startswith("#")]
    stages = [words[-1] for words in lines if words[0] == "FROM"]
    assert stages[-1] == "pytorch", "the default target is the PyTorch image"
    assert "mindspore" in stages
    assert ["WORKDIR", "/workspace"] in lines
    # Build context = samples/, copied to /workspace/samples: the same relative paths as here.
    assert lines.count(["COPY", ".", "samples/"]) == 2


def test_mnist_example_learns_its_generated_digits(mnist, capsys, monkeypatch):
    for name in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    assert mnist.main(["--samples=1024", "--batch-size=32", "--log-interval=1"]) == 0
    losses = [
        float(line.split("loss=")[1].split()[0]) for line in capsys.readouterr().out.splitlines() if line.startswith("[step]")
    ]
    assert len(losses) == 32
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 / 2


def test_mnist_data_is_mnist_shaped_and_the_same_on_every_rank(mnist):
    a, b = mnist.synthetic_mnist(64, seed=1), mnist.synthetic_mnist(64, seed=1)
    assert a.tensors[0].shape == (64, 1, 28, 28)
    assert set(a.tensors[1].tolist()) <= set(range(10))
    assert a.tensors[0].equal(b.tensors[0]) and a.tensors[1].equal(b.tensors[1])
