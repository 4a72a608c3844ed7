"""The node's OS image as the kubelet reports it: os-release's PRETTY_NAME."""

from __future__ import annotations

from pathlib import Path

from trainctl.cluster.kubelet.node import os_image


def test_os_image_is_the_pretty_name(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')
    assert os_image(str(release)) == "Debian GNU/Linux 12 (bookworm)"


def test_without_os_release_the_system_name_is_reported(tmp_path: Path) -> None:
    assert os_image(str(tmp_path / "missing")) == "Linux"
