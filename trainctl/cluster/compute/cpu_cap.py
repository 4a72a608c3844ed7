"""A slow node: every container of a node held to a share of the CPU it may otherwise use.

``trainctl local node degrade NODE --cpu PERCENT`` asks for it from another process; the node's
kubelet, which alone knows each container's ``limits.cpu``, applies it. The cap of a container
is PERCENT of its ``limits.cpu``, or PERCENT of one core when it has none: each process of the
node runs at most PERCENT as fast as it could, as on a throttled machine. Containers started
while the cap is in force get it too; lifting it gives each its own limit back.

The request and the kubelet's answer are two files under ``run/cpu-caps/``: ``<node>`` holds
``SERIAL PERCENT`` (``SERIAL -`` when lifted) and ``<node>.applied`` ``SERIAL`` once applied, or
``SERIAL error: why`` (a node whose enforcer cannot hold CPU: polling). The serial tells a
fresh answer from an old one. Only the cgroup enforcers cap CPU (CFS quota); the kubelet
reads the request when it starts, before any pod runs, and then every :data:`POLL_SECONDS`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Optional, Protocol

log = logging.getLogger(__name__)

CAPS_DIR = Path("run") / "cpu-caps"
POLL_SECONDS = 0.5


class CpuCapUnsupported(Exception):
    """The node's enforcer cannot cap CPU; the message says why."""


class CpuCapped(Protocol):
    def cap_cpu(self, percent: Optional[int]) -> None:
        """Hold every container, running or started later, to ``percent`` (None: lift)."""


def capped_millicores(limit: Optional[int], percent: Optional[int]) -> Optional[int]:
    """A container's CPU limit under a cap: ``percent`` of ``limit``, or of one core (1000m)
    when it has none; ``limit`` itself without a cap."""
    if percent is None:
        return limit
    return max(1, (1000 if limit is None else limit) * percent // 100)


def check_percent(percent: int) -> int:
    if not 1 <= percent <= 100:
        raise ValueError(f"a CPU cap is a percent from 1 to 100, not {percent}")
    return percent


def request_file(directory: Path, node: str) -> Path:
    return directory / CAPS_DIR / node


def _applied_file(directory: Path, node: str) -> Path:
    return directory / CAPS_DIR / f"{node}.applied"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    temporary.replace(path)


def read_request(directory: Path, node: str) -> tuple[int, Optional[int]]:
    """The serial and percent asked for ``node`` (``(0, None)``: never capped)."""
    try:
        fields = request_file(directory, node).read_text().split()
        return int(fields[0]), None if fields[1] == "-" else int(fields[1])
    except (OSError, ValueError, IndexError):
        return 0, None


def ask(directory: Path, node: str, percent: Optional[int]) -> int:
    """Write the request; its serial, to wait for with :func:`answer`."""
    serial = read_request(directory, node)[0] + 1
    _atomic_write(request_file(directory, node), f"{serial} {'-' if percent is None else percent}\n")
    return serial


def forget(directory: Path, node: str) -> None:
    """A new run of the cluster starts whole: no request stands for its kubelet."""
    for path in (request_file(directory, node), _applied_file(directory, node)):
        path.unlink(missing_ok=True)


def answer(directory: Path, node: str, serial: int) -> Optional[str]:
    """None until the kubelet has answered request ``serial`` (or a later one); then ``""``
    when applied, else its error."""
    try:
        head, _, error = _applied_file(directory, node).read_text().strip().partition(" ")
        if int(head) >= serial:
            return error.removeprefix("error: ")
    except (OSError, ValueError):
        pass
    return None


def wait_applied(directory: Path, node: str, serial: int, timeout: float) -> str:
    """The kubelet's answer to ``serial``: ``""`` (applied) or why not. TimeoutError when it
    gives none within ``timeout`` (its kubelet is not running)."""
    deadline = time.monotonic() + timeout
    while (result := answer(directory, node, serial)) is None:
        if time.monotonic() >= deadline:
            raise TimeoutError(f"node {node}'s kubelet did not apply the CPU cap within {timeout:g}s")
        time.sleep(0.05)
    return result


class CapWatcher:
    """In the kubelet: applies its node's requested cap to the enforcer, and answers."""

    def __init__(self, directory: Path, node: str, enforcer: CpuCapped) -> None:
        self.directory, self.node, self.enforcer = directory, node, enforcer
        self._seen = 0  # serial 0: never asked
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def check(self) -> None:
        """Apply the request if it is new (and answer it)."""
        serial, percent = read_request(self.directory, self.node)
        if serial == self._seen:
            return
        self._seen = serial
        error = ""
        try:
            self.enforcer.cap_cpu(percent)
            log.info("CPU cap: %s", "lifted" if percent is None else f"{percent}% of each container's limit "
                                                                         f"(of one core without one)")
        except (CpuCapUnsupported, OSError) as exc:
            error = f"error: {exc}"
            log.warning("CPU cap of %s%% not applied: %s", percent, exc)
        with contextlib.suppress(OSError):
            _atomic_write(_applied_file(self.directory, self.node), f"{serial} {error}".strip() + "\n")

    def start(self) -> None:
        self.check()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-cap")
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(POLL_SECONDS):
            self.check()

    def stop(self) -> None:
        self._stopped.set()
