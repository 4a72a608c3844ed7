"""kubectl on a pseudo-terminal, as a user at a shell runs ``exec -it``, ``run -it`` or
``debug -it``: start it, read what it prints up to a marker, and collect its exit code."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time

from trainctl.cluster.kubelet.sandbox import BWRAP, SANDBOX_LABEL

from tests.support.kubectl import Kubectl


def read_until(fd: int, needle: bytes, timeout: float = 60) -> bytes:
    seen, deadline = b"", time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    assert needle in seen, seen
    return seen


def on_terminal(kubectl: Kubectl, *args: str, env: dict[str, str] | None = None) -> tuple[int, int]:
    """kubectl on a pseudo-terminal of its own (33 rows, 111 columns), as a user runs it:
    (its pid, the terminal's other side)."""
    child, terminal = pty.fork()
    if child == 0:
        os.execvpe("kubectl", ["kubectl", *args], {**kubectl.env, **(env or {})})
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))  # kubectl hears SIGWINCH
    return child, terminal


def finished(child: int, terminal: int, timeout: float = 60) -> int:
    """kubectl's exit code; killed when it has not exited within ``timeout`` (a failed test)."""
    deadline = time.monotonic() + timeout
    while (ended := os.waitpid(child, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            ended = os.waitpid(child, 0)
            break
        time.sleep(0.1)
    os.close(terminal)
    return os.waitstatus_to_exitcode(ended[1])


def prompt(kubectl: Kubectl) -> bytes:
    """sh's prompt for the pods' user: ``nobody`` in the pod sandbox, else the tests' user."""
    labels = kubectl.json("get", "nodes")["items"][0]["metadata"].get("labels", {})
    return b"# " if os.getuid() == 0 and labels.get(SANDBOX_LABEL) != BWRAP else b"$ "
