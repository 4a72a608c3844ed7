"""What the kubelet registers of its node: os-release's PRETTY_NAME as the OS image, and
the control-plane role on the first node only."""

from __future__ import annotations

from pathlib import Path

from trainctl.cluster.apiserver.serving.tables import node_roles
from trainctl.cluster.kubelet import DEFAULT_NODE_NAME
from trainctl.cluster.kubelet.node import node_object, os_image, role_labels


def test_os_image_is_the_pretty_name(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')
    assert os_image(str(release)) == "Debian GNU/Linux 12 (bookworm)"


def test_without_os_release_the_system_name_is_reported(tmp_path: Path) -> None:
    assert os_image(str(tmp_path / "missing")) == "Linux"


def test_only_the_first_node_is_the_control_plane() -> None:
    first = node_object(DEFAULT_NODE_NAME, role_labels(DEFAULT_NODE_NAME, DEFAULT_NODE_NAME))
    joined = node_object("trainctl-local-2", role_labels("trainctl-local-2", DEFAULT_NODE_NAME))
    assert (node_roles(first), node_roles(joined)) == ("control-plane", "<none>")
