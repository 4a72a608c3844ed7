"""The server as a process: the files it writes, start-up, SIGTERM with open streams,
restarts, and one-line errors for bad flags."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import requests
import yaml

from trainctl.cluster.apiserver.process import start_apiserver


def test_ready_files_kubeconfig_and_restart_on_the_same_port(apiserver):
    config = yaml.safe_load(apiserver.kubeconfig.read_text())
    assert config["clusters"][0]["cluster"]["server"] == apiserver.url
    assert config["clusters"][0]["cluster"]["certificate-authority-data"]
    assert config["users"][0]["user"]["token"] == apiserver.token
    assert config["contexts"][0]["context"]["namespace"] == "default"
    for name in ("kubeconfig", "token", "pki/apiserver.key", "pki/ca.key", "state.db"):
        assert stat.S_IMODE(os.stat(apiserver.dir / name).st_mode) == 0o600, name
    assert int((apiserver.dir / "apiserver.port").read_text()) == apiserver.port
    url, token = apiserver.url, apiserver.token
    apiserver.restart()
    assert apiserver.url == url and apiserver.token == token  # old kubeconfigs keep working
    assert requests.get(url + "/readyz", verify=str(apiserver.ca_cert), timeout=10).text == "ok"


def test_sigterm_ends_open_watches_and_exits_cleanly(apiserver):
    opened = threading.Event()
    lines: list[bytes] = []

    def watch() -> None:
        with requests.get(apiserver.url + "/api/v1/pods?watch=true&resourceVersion=0",
                          headers={"Authorization": f"Bearer {apiserver.token}"}, verify=str(apiserver.ca_cert),
                          stream=True, timeout=30) as response:
            opened.set()
            lines.extend(response.iter_lines())

    watcher = threading.Thread(target=watch)
    watcher.start()
    assert opened.wait(10)
    assert apiserver.stop(timeout=10) == 0
    watcher.join(10)
    assert not watcher.is_alive() and lines == []
    assert not (apiserver.dir / "apiserver.port").exists()


def test_bad_flags_are_one_line_errors(tmp_path):
    for flags, message in ((["--host", "0.0.0.0"], "not a loopback address"),
                           (["--service-cidr", "300.0.0.0/8"], "--service-cidr")):
        result = subprocess.run([sys.executable, "-m", "trainctl.cluster.apiserver", "--dir", str(tmp_path), *flags],
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 2
        assert message in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_a_port_in_use_is_reported(tmp_path, apiserver):
    try:
        start_apiserver(tmp_path / "second", port=apiserver.port, timeout=15)
    except RuntimeError as exc:
        assert "cannot listen" in str(exc)
    else:
        raise AssertionError("a second server started on a busy port")
