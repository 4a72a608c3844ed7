"""Fixtures shared by every test package.

``apiserver`` is a real embedded API server (a subprocess on loopback, HTTPS with its own
CA, fresh state) per test; ``kube_env`` is the environment to run kubectl or any other
client against it without touching the user's own ``~/.kube``. The whole session has a
TMPDIR of its own, which it must leave without ``trainctl run``'s kept logs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainctl.cluster.apiserver.process import ApiServerHandle, start_apiserver

from tests.support.kubectl import client_env


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[ApiServerHandle]:
    """A fresh API server in a temporary directory, stopped after the test.

    The handle has ``url``, ``kubeconfig``, ``token``, ``ca_cert``, ``pid``, ``stop()``,
    ``kill()`` (SIGKILL) and ``restart()``.
    """
    handle = start_apiserver(tmp_path / "apiserver", timeout=60.0)  # generous: a loaded 2-core machine
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def kube_env(tmp_path: Path, apiserver: ApiServerHandle) -> dict[str, str]:
    """Environment for client processes: KUBECONFIG is the fixture server's, HOME is an
    empty temporary directory (so kubectl's discovery cache starts cold)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return client_env(apiserver.kubeconfig, home)


@pytest.fixture(scope="session", autouse=True)
def session_tmpdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """TMPDIR for this session (and the processes it starts), checked at the end for kept logs.

    ``trainctl run`` on a throwaway cluster keeps the pods' logs under TMPDIR on purpose;
    a test that runs it points TMPDIR at its own ``tmp_path``, so none may land here.
    Only this session's directory is looked at: other runs on the machine have theirs.
    """
    directory = tmp_path_factory.mktemp("tmpdir")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(directory)
    tempfile.tempdir = None  # read TMPDIR again
    try:
        yield directory
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
        tempfile.tempdir = None
    left = sorted(path.name for path in directory.glob("trainctl-run-logs-*"))
    assert not left, f"the tests left `trainctl run`'s logs behind in {directory}: {left}"
