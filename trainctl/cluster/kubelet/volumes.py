"""A pod's volumes, made on this machine before its first container starts.

A real kubelet writes each volume of a pod into a directory of its own and mounts it into the
containers at the ``mountPath`` their ``volumeMounts`` name. This one does the first half here:
``configMap``, ``secret``, ``downwardAPI`` and ``projected`` volumes become files under
``DIR/pods/<uid>/volumes/<name>/`` (the keys, or the ``items`` asked for, with their modes),
``emptyDir`` an empty directory there, and ``hostPath`` stays the machine's path. The pod
sandbox (:mod:`.sandbox`) binds each at its mount path; without the sandbox there is no
mount namespace to bind in, and volumes are not mounted (see docs/local-cluster.md).
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster.kubelet import paths

Obj = dict[str, Any]
Getter = Callable[[str, str], Optional[Obj]]  # (namespace, name) -> the object, None when missing

DIRECTORY = "volumes"
DEFAULT_MODE = 0o644


class VolumeError(Exception):
    """A volume cannot be made (a missing ConfigMap, Secret or key, a bad path)."""


@dataclass(frozen=True)
class Mount:
    """One bind into the pod: ``source`` on this machine at ``target`` in the pod."""

    source: Path
    target: str
    read_only: bool


def _write_file(directory: Path, relative: str, data: bytes, mode: int) -> None:
    parts = [part for part in relative.split("/") if part]
    if relative.startswith("/") or not parts or any(part == ".." for part in parts):
        raise VolumeError(f"invalid path {relative!r}: must be relative and may not contain '..'")
    path = directory.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode & 0o777)


def _key_files(source: Obj, data: dict[str, bytes], what: str) -> list[tuple[str, bytes, int]]:
    """(path, bytes, mode) for the keys of a ConfigMap or Secret as ``source`` selects them."""
    default = source.get("defaultMode")
    mode = default if isinstance(default, int) else DEFAULT_MODE
    items = source.get("items")
    if not items:
        return [(key, value, mode) for key, value in data.items()]
    files = []
    for item in items:
        key = item.get("key")
        if key not in data:
            if source.get("optional"):
                continue
            raise VolumeError(f'{what}: key "{key}" not found')
        item_mode = item.get("mode")
        files.append((str(item.get("path") or key), data[key], item_mode if isinstance(item_mode, int) else mode))
    return files


def _config_files(source: Obj, namespace: str, configmap: Getter, secret: Getter) -> list[tuple[str, bytes, int]]:
    if "configMap" in source:
        ref = source["configMap"] or {}
        obj = configmap(namespace, str(ref.get("name")))
        if obj is None:
            if ref.get("optional"):
                return []
            raise VolumeError(f'configmap "{ref.get("name")}" not found')
        data = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return _key_files(ref, data, f'configmap "{ref.get("name")}"')
    if "secret" in source:
        ref = source["secret"] or {}
        name = ref.get("secretName") or ref.get("name")
        obj = secret(namespace, str(name))
        if obj is None:
            if ref.get("optional"):
                return []
            raise VolumeError(f'secret "{name}" not found')
        data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        data.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
        return _key_files(ref, data, f'secret "{name}"')
    return []


def _downward_files(source: Obj, pod: Obj) -> list[tuple[str, bytes, int]]:
    meta = pod.get("metadata") or {}
    files = []
    for item in source.get("items") or []:
        field = (item.get("fieldRef") or {}).get("fieldPath", "")
        if field in ("metadata.labels", "metadata.annotations"):
            values = meta.get(field.split(".", 1)[1]) or {}
            text = "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
        elif field.startswith("metadata."):
            text = str(meta.get(field.split(".", 1)[1], ""))
        else:
            continue
        mode = item.get("mode")
        files.append((str(item.get("path")), text.encode(), mode if isinstance(mode, int) else DEFAULT_MODE))
    return files


def _files(volume: Obj, pod: Obj, configmap: Getter, secret: Getter, token_dir: Path) -> list[tuple[str, bytes, int]]:
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    if "downwardAPI" in volume:
        return _downward_files(volume["downwardAPI"] or {}, pod)
    if "projected" not in volume:
        return _config_files(volume, namespace, configmap, secret)
    files = []
    for source in (volume["projected"] or {}).get("sources") or []:
        if "serviceAccountToken" in source:
            token = token_dir / "token"
            if token.exists():
                files.append((str(source["serviceAccountToken"].get("path") or "token"), token.read_bytes(), 0o644))
        elif "downwardAPI" in source:
            files += _downward_files(source["downwardAPI"] or {}, pod)
        else:
            files += _config_files(source, namespace, configmap, secret)
    return files


def make_volumes(pod: Obj, pod_dir: Path, configmap: Getter, secret: Getter, owner: Optional[int]) -> dict[str, Path]:
    """Each volume of ``pod`` by name, made under ``pod_dir/volumes`` (a hostPath as it is);
    ``owner`` (a uid) gets the writable ones. Raises :class:`VolumeError`."""
    made: dict[str, Path] = {}
    base = pod_dir / DIRECTORY
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = volume.get("name")
        if not isinstance(name, str):
            continue
        if "hostPath" in volume:
            host = Path(str((volume["hostPath"] or {}).get("path", "")))
            kind = (volume["hostPath"] or {}).get("type", "")
            if kind == "DirectoryOrCreate":
                host.mkdir(parents=True, exist_ok=True)
            elif kind == "FileOrCreate" and not host.exists():
                host.parent.mkdir(parents=True, exist_ok=True)
                host.touch()
            if not host.exists():
                raise VolumeError(f'hostPath "{host}" does not exist')
            made[name] = host
            continue
        try:
            directory = paths.inside(base, name)
        except paths.OutsideDirectory as exc:
            raise VolumeError(str(exc)) from None
        if "emptyDir" in volume:
            directory.mkdir(parents=True, exist_ok=True)
            if owner is not None:
                os.chown(directory, owner, owner)
            made[name] = directory
            continue
        files = _files(volume, pod, configmap, secret, pod_dir / "serviceaccount")
        if directory.exists():  # made again (a restarted container): the objects may have changed
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        for relative, data, mode in files:
            _write_file(directory, relative, data, mode)
        made[name] = directory
    return made


def mounts(pod: Obj, volumes: dict[str, Path]) -> list[Mount]:
    """Every ``volumeMounts`` entry of the pod's containers (init containers first), as binds."""
    found: list[Mount] = []
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for entry in container.get("volumeMounts") or []:
            source = volumes.get(str(entry.get("name")))
            target = entry.get("mountPath")
            if source is None or not isinstance(target, str) or not target.startswith("/"):
                continue
            sub = entry.get("subPath")
            if isinstance(sub, str) and sub:
                if sub.startswith("/") or ".." in sub.split("/"):
                    raise VolumeError(f"invalid subPath {sub!r}")
                source = source / sub
                if not source.exists():
                    source.mkdir(parents=True)
            mount = Mount(source, os.path.normpath(target), bool(entry.get("readOnly")))
            if mount not in found:
                found.append(mount)
    return found
