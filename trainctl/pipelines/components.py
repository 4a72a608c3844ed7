"""Kubeflow Pipelines (v2) components that launch a PyTorchJob or an MSJob and wait for it.

They are container components on the trainctl launcher image, whose entry point
``python -m trainctl.pipelines.launch`` runs the same launch-and-wait code as
``trainctl run``. A lightweight Python component would have to ``pip install`` trainctl
(and kfp) each time the step's pod starts, which needs a package index reachable from the
cluster and makes every step slower; the image already holds trainctl, so the step starts
at once and needs nothing else at run time — not even kfp.

Inputs: the job as a manifest, or the common parameters (image, command, args, replicas,
elastic bounds, processes per node, CPU, memory, GPUs, NPUs); the namespace (default: the
step's own); a timeout in seconds (0: as long as the job runs) and whether to delete the
job when it ends. Outputs: ``condition`` (Succeeded, Failed, TimedOut …) and ``status``
(the job's status). The step fails, with the job's failure message, unless the job
Succeeded.

The image can be set with ``TRAINCTL_LAUNCHER_IMAGE`` when the pipeline is compiled.
"""

# No "from __future__ import annotations": kfp reads the parameter annotations as objects.
import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from kfp import dsl

from trainctl.api import kinds

try:
    _VERSION = version("trainctl")
except PackageNotFoundError:  # running from a source tree
    _VERSION = "latest"

# The project's launcher image (the Dockerfile's launcher target): trainctl installed, `python` on PATH.
TRAINCTL_IMAGE = os.environ.get("TRAINCTL_LAUNCHER_IMAGE", f"ghcr.io/trainctl/trainctl-launcher:{_VERSION}")
ENTRY_POINT = ["python", "-m", "trainctl.pipelines.launch"]


# The outputs are paths the entry point writes to, so their flags say so.
_OUTPUT_FLAGS = {"condition": "condition_path", "status": "status_path"}


def _container(kind: str, parameters: dict[str, Any]) -> dsl.ContainerSpec:
    """The step's container: every parameter becomes one ``--flag=value`` argument of the entry point.

    The components pass ``locals()``, i.e. exactly their own parameters, so a parameter
    added to a component's signature reaches the entry point without being listed again.
    ``=`` keeps a value that starts with a dash (a manifest beginning with ``---``) from
    being read as an option.
    """
    args: list[Any] = [f"--kind={kind}"]
    inputs = [(name, value) for name, value in parameters.items() if name not in _OUTPUT_FLAGS]
    outputs = [(_OUTPUT_FLAGS[name], value) for name, value in parameters.items() if name in _OUTPUT_FLAGS]
    for name, value in inputs + outputs:
        args.append(dsl.ConcatPlaceholder([f"--{name.replace('_', '-')}=", value]))
    return dsl.ContainerSpec(image=TRAINCTL_IMAGE, command=ENTRY_POINT, args=args)


@dsl.container_component
def pytorchjob_launcher(
    condition: dsl.OutputPath(str),  # type: ignore[valid-type]  # kfp's outputs are calls in annotations
    status: dsl.OutputPath(dict),  # type: ignore[valid-type]
    name: str = "",
    namespace: str = "",
    manifest: str = "",
    image: str = "",
    command: list[str] = [],  # noqa: B006 - KFP reads defaults from the signature; never mutated
    args: list[str] = [],  # noqa: B006 - as above
    replicas: int = 1,
    min_replicas: int = 0,
    max_replicas: int = 0,
    nproc_per_node: str = "",
    cpu: str = "",
    memory: str = "",
    gpus: int = 0,
    npus: int = 0,
    port: int = 0,
    timeout_seconds: int = 0,
    delete_when_done: bool = True,
) -> dsl.ContainerSpec:
    """Launch a PyTorchJob (kubeflow.org/v1) and wait for it; fails when the job does not succeed.

    Either ``manifest`` (the whole PyTorchJob, YAML or JSON) or ``image`` and the other
    parameters: one Master and ``replicas - 1`` Workers, or, with ``max_replicas``, an
    elastic job of Workers between ``min_replicas`` and ``max_replicas``.
    """
    return _container(kinds.PYTORCHJOB.kind, locals())


@dsl.container_component
def msjob_launcher(
    condition: dsl.OutputPath(str),  # type: ignore[valid-type]  # kfp's outputs are calls in annotations
    status: dsl.OutputPath(dict),  # type: ignore[valid-type]
    name: str = "",
    namespace: str = "",
    manifest: str = "",
    image: str = "",
    command: list[str] = [],  # noqa: B006 - KFP reads defaults from the signature; never mutated
    args: list[str] = [],  # noqa: B006 - as above
    replicas: int = 1,
    cpu: str = "",
    memory: str = "",
    gpus: int = 0,
    npus: int = 0,
    port: int = 0,
    timeout_seconds: int = 0,
    delete_when_done: bool = True,
) -> dsl.ContainerSpec:
    """Launch an MSJob (mindspore.gitee.com/v1) and wait for it; fails when the job does not succeed.

    Either ``manifest`` (the whole MSJob, YAML or JSON) or ``image`` and the other
    parameters: ``replicas`` Workers, plus the Scheduler MindSpore needs when there are two
    or more.
    """
    return _container(kinds.MSJOB.kind, locals())
