"""Job manifests for tests: one PyTorchJob builder and one MSJob builder, varied by keyword.

By default a job looks as the API server stores it (namespace ``default``, a ``uid`` derived
from its name), which is what the pure reconcile tests feed the core. A job a test sends to a
real API server is built with ``uid=None`` (the server assigns it), and with
``namespace=None`` when the namespace comes from the request (``kubectl -n``, a launcher's
option).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any, Optional

Obj = dict[str, Any]
_DERIVED = "uid-<name>"  # the default uid: "uid-" + the job's name
DELETE = "<delete>"  # as a value in mutate(): remove the key


def unique(prefix: str) -> str:
    """A fresh object name, for tests that share one API server."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def container(name: str = "pytorch", image: str = "train:1", **extra: Any) -> Obj:
    return {"name": name, "image": image, **extra}


def replica(replicas: Optional[int] = 1, *, containers: Optional[list[Obj]] = None, restart: Optional[str] = None,
            **spec: Any) -> Obj:
    """One entry of a job's replica specs; ``spec`` goes into the pod template's spec."""
    out: Obj = {"template": {"spec": {"containers": containers or [container()], **spec}}}
    if replicas is not None:
        out["replicas"] = replicas
    if restart:
        out["restartPolicy"] = restart
    return out


def _command(command: Optional[list[str]]) -> Obj:
    return {"command": list(command)} if command is not None else {}


def _metadata(name: str, namespace: Optional[str], uid: Optional[str]) -> Obj:
    metadata: Obj = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if uid is not None:
        metadata["uid"] = f"uid-{name}" if uid == _DERIVED else uid
    return metadata


def pytorchjob(name: str = "mnist", command: Optional[list[str]] = None, *, master: bool = True,
               workers: Optional[int] = 2, restart: Optional[str] = None, image: str = "train:1",
               namespace: Optional[str] = "default", uid: Optional[str] = _DERIVED, **spec: Any) -> Obj:
    """A PyTorchJob with a Master (unless ``master=False``) and ``workers`` Workers.

    ``workers=None`` leaves the Worker spec out; ``workers=0`` keeps it with no replicas.
    ``command`` and ``image`` are the one container's; ``spec`` adds top-level spec fields
    (``runPolicy``, ``elasticPolicy``, ...).
    """
    roles = {"Master": 1 if master else None, "Worker": workers}
    return _job("kubeflow.org/v1", "PyTorchJob", "pytorchReplicaSpecs", roles, container("pytorch", image, **_command(command)),
                restart=restart, metadata=_metadata(name, namespace, uid), spec=spec)


def msjob(name: str = "ms", command: Optional[list[str]] = None, *, scheduler: bool = True, ps: int = 0,
          workers: int = 2, restart: Optional[str] = None, image: str = "ms:2", namespace: Optional[str] = "default",
          uid: Optional[str] = _DERIVED, **spec: Any) -> Obj:
    """An MSJob with a Scheduler (unless ``scheduler=False``), ``ps`` PS and ``workers`` Workers
    (a role with no replicas is left out)."""
    roles = {"Scheduler": 1 if scheduler else None, "PS": ps or None, "Worker": workers or None}
    return _job("mindspore.gitee.com/v1", "MSJob", "msReplicaSpecs", roles, container("mindspore", image, **_command(command)),
                restart=restart, metadata=_metadata(name, namespace, uid), spec=spec)


def _job(api_version: str, kind: str, specs_field: str, roles: dict[str, Optional[int]], template: Obj, *,
         restart: Optional[str], metadata: Obj, spec: dict[str, Any]) -> Obj:
    """A job whose roles (None: left out) each run a copy of the ``template`` container."""
    specs = {role: replica(count, containers=[copy.deepcopy(template)], restart=restart)
             for role, count in roles.items() if count is not None}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": {specs_field: specs, **spec}}


def mutate(obj: Obj, changes: dict[tuple[Any, ...], Any]) -> Obj:
    """A deep copy of ``obj`` with each key path set to a value (or removed, with DELETE)."""
    out = copy.deepcopy(obj)
    for path, value in changes.items():
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
        if value == DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = copy.deepcopy(value)
    return out
