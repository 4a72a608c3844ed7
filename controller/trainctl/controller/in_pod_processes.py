"""What the controller runs inside a worker's container (``pods/exec``) to look at its processes.

The user's image has Python (the job trains with it) and nothing of trainctl's, so this file
is the program itself: it imports only the standard library, and the controller sends its
source as ``python3 -c SOURCE MODE`` (:mod:`trainctl.controller.pod_exec`). It prints one JSON
object: the container's processes, each with its pid, state letter (``T``: stopped by a
signal) and command line.

``MODE`` ``states`` only looks. ``freeze`` also stops every Python process of the container
(SIGSTOP), and ``dump`` makes each write all its threads' stacks to its stderr, the pod's
log: the controller sets ``PYTHONFAULTHANDLER=1`` in an opted-in job's containers, so a
SIGABRT runs faulthandler before the process dies. The controller freezes every worker of
the job before it dumps any: a rank that dies of its dump would otherwise wake its peers out
of the collective they wait in (a connection reset) before their own stacks are written. A
stopped process handles a signal only once continued, so each gets SIGABRT then SIGCONT,
and the pending SIGABRT comes first; the program then waits a little for them to finish
writing. The report is printed before any signal, so it shows the states as they were, and
the container's death may end this program too.

The container's processes are those /proc shows, but this program and its ancestors (the
exec's own). A local cluster runs every pod in one PID namespace; its kubelet marks a
container's processes with ``TRAINCTL_CONTAINER_ID`` in their environment, which exec
carries too, so where that variable is set only processes carrying the same value count.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, Optional

_MARKER = "TRAINCTL_CONTAINER_ID"
_EXIT_WAIT_SECONDS = 5.0


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _state_and_parent(pid: int) -> tuple[Optional[str], Optional[int]]:
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None, None
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields[0].decode(), int(fields[1])


def _ancestors() -> set[int]:
    own, pid = set(), os.getpid()
    while pid > 0 and pid not in own:
        own.add(pid)
        pid = _state_and_parent(pid)[1] or 0
    return own


def processes() -> list[dict[str, Any]]:
    """The container's processes: pid, state, command line, and whether it runs Python."""
    marker = os.environ.get(_MARKER)
    needle = f"{_MARKER}={marker}".encode() if marker else None
    own = _ancestors()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in own:
            continue
        pid = int(name)
        if needle is not None and needle not in (_read(f"/proc/{pid}/environ") or b"").split(b"\0"):
            continue
        state, _ = _state_and_parent(pid)
        cmdline = (_read(f"/proc/{pid}/cmdline") or b"").split(b"\0")
        if state is None or state in ("Z", "X") or not cmdline[0]:
            continue
        program = os.path.basename(cmdline[0].decode(errors="replace"))
        found.append({"pid": pid, "state": state, "python": program.startswith("python"),
                      "command": " ".join(part.decode(errors="replace") for part in cmdline if part)[:300]})
    return found


def _signal(pids: list[int], *signums: int) -> None:
    for pid in pids:
        for signum in signums:
            try:
                os.kill(pid, signum)
            except OSError:
                pass


def dump(found: list[dict[str, Any]]) -> list[int]:
    """SIGABRT (then SIGCONT) to every Python process; wait for them to have written and died."""
    targets = [p["pid"] for p in found if p["python"]]
    _signal(targets, signal.SIGABRT, signal.SIGCONT)
    deadline = time.monotonic() + _EXIT_WAIT_SECONDS
    while time.monotonic() < deadline and any(_state_and_parent(pid)[0] not in (None, "Z", "X") for pid in targets):
        time.sleep(0.1)
    return targets


def main(mode: str) -> None:
    found = processes()
    # Printed first: a container whose processes die may take this program with it.
    print(json.dumps({"processes": found}), flush=True)
    if mode == "freeze":
        _signal([p["pid"] for p in found if p["python"]], signal.SIGSTOP)
    elif mode == "dump":
        dump(found)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "states")
