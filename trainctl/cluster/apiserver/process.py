"""Start the API server as a child process and wait until it serves.

``trainctl local up`` and the tests use this; the server stays a separate process so it can
be killed (``kill()`` is SIGKILL) and started again on the same directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

PORT_FILE = "apiserver.port"  # written last, once the server serves
UNIX_SOCKET = Path("run") / "apiserver.sock"  # the same server, reachable across network namespaces


def wait_for_port_file(port_file: Path, alive: Callable[[], bool], timeout: float) -> bool | None:
    """Wait for the API server's port file: True once it exists, False if the server exited
    first, None at the timeout. The file is another process's only readiness signal."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while not port_file.exists():
        if not alive():
            return False
        if time.monotonic() > deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 1.5, 0.05)
    return True
LOG_FILE = "apiserver.log"


class ApiServerError(RuntimeError):
    """The server did not start; the message carries its last output."""


class ApiServerHandle:
    def __init__(self, data_dir: Path, port: int, host: str, extra_args: list[str], log_path: Path | None) -> None:
        self.dir = data_dir
        self.host = host
        self.port = port
        self.extra_args = list(extra_args)
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def ca_cert(self) -> Path:
        """The CA that signed the serving certificate (for clients that verify TLS)."""
        return self.dir / "pki" / "ca.crt"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def token(self) -> str:
        return (self.dir / "token").read_text().strip()

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self, timeout: float = 15.0) -> ApiServerHandle:
        port_file = self.dir / PORT_FILE
        port_file.unlink(missing_ok=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_path or self.dir / LOG_FILE
        command = [sys.executable, "-m", "trainctl.cluster.apiserver", "--dir", str(self.dir),
                   "--port", str(self.port), "--host", self.host, *self.extra_args]
        with open(log_path, "ab") as output:
            self._process = subprocess.Popen(command, stdout=output, stderr=output, stdin=subprocess.DEVNULL)
        process = self._process
        ready = wait_for_port_file(port_file, lambda: process.poll() is None, timeout)
        if ready is False:
            lines = log_path.read_text(errors="replace").strip().splitlines()
            last = lines[-1] if lines else "no output"
            raise ApiServerError(f"apiserver exited with code {process.returncode}: {last}")
        if ready is None:
            self.kill()
            raise ApiServerError(f"apiserver did not become ready within {timeout:.0f}s")
        self.port = int(port_file.read_text())
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time; returns the exit code."""
        process = self._process
        if process is None or process.poll() is not None:
            return process.returncode if process else None
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int | None:
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        return process.wait()

    def restart(self, timeout: float = 15.0) -> ApiServerHandle:
        """Stop (gracefully) and start again on the same directory and port."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> ApiServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_apiserver(data_dir: str | os.PathLike[str], port: int = 0, host: str = "127.0.0.1",
                    extra_args: list[str] | None = None, log_path: str | os.PathLike[str] | None = None,
                    timeout: float = 15.0) -> ApiServerHandle:
    """Start ``python -m trainctl.cluster.apiserver`` on ``data_dir`` and wait until it serves.

    ``extra_args`` are more server flags (e.g. ``["--service-cidr", "127.97.0.0/16"]``);
    ``log_path`` receives the server's output (default ``DIR/apiserver.log``).
    """
    handle = ApiServerHandle(Path(data_dir).resolve(), port, host, extra_args or [],
                             Path(log_path) if log_path else None)
    return handle.start(timeout)
