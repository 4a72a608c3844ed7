"""Pid files that never name a stranger: "<pid> <kernel start time>", checked on every read.

The supervisor, ``trainctl local status/down`` and the node commands all find the cluster's
processes through these files; a pid alone proves nothing (pids are reused), the kernel's
start time beside it does.
"""

from __future__ import annotations

import contextlib
import os
import select
from pathlib import Path
from typing import Optional

from trainctl.cluster.kubelet.runtime import process_start_time


def write_pid_file(path: Path, pid: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{pid} {process_start_time(pid) or ''}\n")
    os.replace(tmp, path)


def read_pid_file(path: Path) -> Optional[int]:
    """The pid in ``path`` if that process is still the one that wrote it, else None.

    A pid alone proves nothing (pids are reused); the kernel's start time beside it does,
    so a file without one is not trusted: ``down`` must never kill a stranger."""
    try:
        fields = path.read_text().split()
    except OSError:
        return None
    if len(fields) < 2 or not fields[0].isdigit():
        return None
    pid = int(fields[0])
    if process_start_time(pid) != fields[1]:
        return None
    return pid


def wait_pid_exit(pid: int, timeout: float) -> bool:
    """Wait for any process (not only a child) to exit, without polling: a pidfd is readable then."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def signal_pid_file(path: Path, signum: int) -> Optional[int]:
    pid = read_pid_file(path)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
    return pid
