"""A pod's volumes as files on this machine, and the binds that put them at their mountPath."""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from typing import Any, Optional

import pytest

from trainctl.cluster.kubelet.volumes import Mount, VolumeError, make_volumes, mounts

CONFIGMAPS = {("ns", "scripts"): {"data": {"run.py": "print(1)\n", "other": "x"},
                                 "binaryData": {"blob": base64.b64encode(b"\0\1").decode()}}}
SECRETS = {("ns", "creds"): {"data": {"password": base64.b64encode(b"hunter2").decode()}}}


def configmap(namespace: str, name: str) -> Optional[dict[str, Any]]:
    return CONFIGMAPS.get((namespace, name))


def secret(namespace: str, name: str) -> Optional[dict[str, Any]]:
    return SECRETS.get((namespace, name))


def pod(volumes: list[dict[str, Any]], mounts_: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "a"}},
            "spec": {"volumes": volumes, "containers": [{"name": "main", "volumeMounts": mounts_}]}}


def test_a_configmap_volume_holds_every_key_and_mounts_at_its_path(tmp_path: Path) -> None:
    spec = pod([{"name": "scripts", "configMap": {"name": "scripts"}}], [{"name": "scripts", "mountPath": "/opt"}])
    made = make_volumes(spec, tmp_path, configmap, secret, owner=None)
    assert (made["scripts"] / "run.py").read_text() == "print(1)\n"
    assert (made["scripts"] / "blob").read_bytes() == b"\0\1"
    assert stat.S_IMODE((made["scripts"] / "other").stat().st_mode) == 0o644
    assert mounts(spec, made) == [Mount(made["scripts"], "/opt", False)]


def test_items_modes_and_a_secret_as_kube_projects_them(tmp_path: Path) -> None:
    spec = pod([{"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400,
                                             "items": [{"key": "password", "path": "sub/pw"}]}},
                {"name": "info", "projected": {"sources": [
                    {"configMap": {"name": "scripts", "items": [{"key": "other", "path": "o", "mode": 0o600}]}},
                    {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                                               {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}],
               [{"name": "creds", "mountPath": "/etc/creds", "readOnly": True}])
    made = make_volumes(spec, tmp_path, configmap, secret, owner=None)
    password = made["creds"] / "sub" / "pw"
    assert password.read_bytes() == b"hunter2" and stat.S_IMODE(password.stat().st_mode) == 0o400
    assert (made["info"] / "o").read_text() == "x" and stat.S_IMODE((made["info"] / "o").stat().st_mode) == 0o600
    assert (made["info"] / "labels").read_text() == 'app="a"'
    assert (made["info"] / "name").read_text() == "p"
    assert mounts(spec, made) == [Mount(made["creds"], "/etc/creds", True)]


def test_a_missing_configmap_or_key_is_an_error_unless_optional(tmp_path: Path) -> None:
    with pytest.raises(VolumeError, match='configmap "nope" not found'):
        make_volumes(pod([{"name": "v", "configMap": {"name": "nope"}}], []), tmp_path, configmap, secret, owner=None)
    with pytest.raises(VolumeError, match='key "nokey" not found'):
        make_volumes(pod([{"name": "v", "configMap": {"name": "scripts", "items": [{"key": "nokey", "path": "k"}]}}],
                         []), tmp_path, configmap, secret, owner=None)
    made = make_volumes(pod([{"name": "v", "configMap": {"name": "nope", "optional": True}}], []), tmp_path,
                        configmap, secret, owner=None)
    assert list(made["v"].iterdir()) == []


def test_emptydir_hostpath_and_subpath(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    spec = pod([{"name": "scratch", "emptyDir": {}}, {"name": "h", "hostPath": {"path": str(host)}}],
               [{"name": "scratch", "mountPath": "/scratch/"}, {"name": "h", "mountPath": "/data", "subPath": "part"}])
    made = make_volumes(spec, tmp_path / "pod", configmap, secret, owner=None)
    assert made["scratch"].is_dir() and made["h"] == host
    assert mounts(spec, made) == [Mount(made["scratch"], "/scratch", False), Mount(host / "part", "/data", False)]
    assert (host / "part").is_dir()


@pytest.mark.parametrize("bad", [{"path": "../escape"}, {"path": "/abs"}])
def test_an_item_path_leading_out_of_the_volume_is_refused(tmp_path: Path, bad: dict[str, str]) -> None:
    spec = pod([{"name": "v", "configMap": {"name": "scripts", "items": [{"key": "other", **bad}]}}], [])
    with pytest.raises(VolumeError):
        make_volumes(spec, tmp_path, configmap, secret, owner=None)


def test_a_subpath_leading_out_of_the_volume_is_refused(tmp_path: Path) -> None:
    spec = pod([{"name": "scratch", "emptyDir": {}}], [{"name": "scratch", "mountPath": "/s", "subPath": "../../etc"}])
    made = make_volumes(spec, tmp_path, configmap, secret, owner=None)
    with pytest.raises(VolumeError):
        mounts(spec, made)
