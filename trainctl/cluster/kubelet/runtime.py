"""The container runtime: a container is a process group on this machine.

Each container runs in its own session (so a signal reaches everything it spawned), and
every process it starts carries ``TRAINCTL_CONTAINER_ID`` in its environment, so the
processes that leave the session (torchrun starts its workers with ``start_new_session``)
still die with the container, as they would in a real container's PID namespace. Its
stdout and stderr are written to ``DIR/pods/<uid>/<container>/<restartCount>.log`` in the
CRI log format the API server serves ``pods/log`` from, and its process group is recorded
under ``DIR/kubelet/processes`` so a restarted kubelet (or ``trainctl local down``) can find
and stop whatever a crashed kubelet left behind. Each run also lives in a resource group of the
node's enforcer (``resources``): a cgroup or a polled process tree that holds ``limits.memory``
and ``limits.cpu`` and answers for the run's usage and for an OOM kill. The last lines a run
printed stay at hand for a status message (``terminationMessagePolicy: FallbackToLogsOnError``).

A container whose spec asks for ``stdin`` gets a pipe on its standard input, or with ``tty`` a
pseudo-terminal for all three streams, so that ``kubectl attach`` (and ``kubectl run -i``) can
write to it and read what it prints (:meth:`ContainerProcess.attach`); its output still goes
to the log. ``stdinOnce`` closes that input when the first attached client closes its own.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Optional

from trainctl.cluster.compute.accounting import ContainerGroup
from trainctl.cluster.kubelet import paths
from trainctl.kube.timestamps import now_rfc3339

# What the real kubelet keeps of a failed container's log as its termination message
# (FallbackToLogsOnError): the last 80 lines, of which the last 2048 bytes.
TERMINATION_LOG_LINES = 80
TERMINATION_LOG_BYTES = 2048


def rfc3339_nano(ns: int) -> str:
    seconds, fraction = divmod(ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{fraction:09d}Z"


def exit_code(returncode: int) -> int:
    """Like a container runtime: killed by signal n -> 128+n."""
    return 128 - returncode if returncode < 0 else returncode


def _stat(pid: int) -> list[str]:
    """The fields of /proc/pid/stat after the command name (state first); [] without the process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return stat.rsplit(")", 1)[1].split()


def process_start_time(pid: int) -> Optional[str]:
    """The kernel's start time of a live ``pid`` (field 22 of /proc/pid/stat), to detect pid
    reuse; None when there is no such process or it is a zombie (dead, not yet reaped)."""
    fields = _stat(pid)
    return None if not fields or fields[0] in ("Z", "X") else fields[19]


def process_stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped by a signal (SIGSTOP: a frozen node)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] in ("T", "t")


# Every node of a cluster writes its pods' logs under the one DIR/pods, which the API server
# reads; each pod directory names the node that runs the pod, so that a node collects only
# its own pods' logs, not a pod it has not yet seen that started on another node.
POD_NODE_FILE = ".node"  # not a container name: those are DNS labels


def claim_pod_directory(pods_dir: Path, uid: str, node_name: str) -> None:
    """Mark ``pods_dir/uid`` as the directory of a pod this node runs."""
    directory = paths.inside(pods_dir, uid)
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / POD_NODE_FILE
    if not marker.exists():
        marker.write_text(node_name + "\n")


def pod_directory_node(directory: Path) -> Optional[str]:
    """The node that claimed a pod directory (None: none did, or it cannot be read)."""
    try:
        return (directory / POD_NODE_FILE).read_text().strip() or None
    except OSError:
        return None


CONTAINER_ID_VARIABLE = "TRAINCTL_CONTAINER_ID"


def marked_processes(container_id: str) -> list[int]:
    """Live processes whose environment carries ``TRAINCTL_CONTAINER_ID=<container_id>``."""
    needle = f"{CONTAINER_ID_VARIABLE}={container_id}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if needle in variables:
            found.append(int(entry.name))
    return found


def group_members(pgid: int) -> list[int]:
    """Live processes of the process group ``pgid``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if len(fields) > 2 and fields[2] == str(pgid):
                found.append(int(entry.name))
    return found


def signal_container(pgid: int, container_id: str, signum: int, spare: int = 0) -> None:
    """Signal a container's process group and every process that left it (each once: a
    second SIGTERM while a handler is exiting would kill the process with 143). ``spare``: a
    process of the group left out (a relay that must outlive the container's own processes)."""
    if spare:
        for pid in group_members(pgid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if pid != spare:
                    os.kill(pid, signum)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)
    if container_id:
        for pid in marked_processes(container_id):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) != pgid:
                    os.kill(pid, signum)


@dataclass
class ProcessRecord:
    """What is written to disk for each running container process group."""

    pid: int
    start_time: str
    pod_uid: str
    container: str
    container_id: str = ""

    def alive(self) -> bool:
        return process_start_time(self.pid) == self.start_time


def signal_live(records: Iterable[ProcessRecord], signum: int) -> int:
    """Signal each recorded process group that is still alive (and what left it); how many."""
    live = [record for record in records if record.alive()]
    for record in live:
        signal_container(record.pid, record.container_id, signum)
    return len(live)


class ProcessRegistry:
    """``DIR/kubelet/processes/<pod-uid>.<container>.json``: the process groups we own."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _path(self, pod_uid: str, container: str) -> Path:
        return paths.inside(self.directory, f"{pod_uid}.{container}.json")

    def add(self, record: ProcessRecord) -> None:
        path = self._path(record.pod_uid, record.container)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record.__dict__))
        os.replace(tmp, path)

    def remove(self, pod_uid: str, container: str) -> None:
        self._path(pod_uid, container).unlink(missing_ok=True)

    def records(self) -> list[ProcessRecord]:
        return [record for _, record in self._read()]

    def _read(self) -> list[tuple[Path, ProcessRecord]]:
        found = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                record = ProcessRecord(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError):
                path.unlink(missing_ok=True)
                continue
            if isinstance(record.pid, int) and record.pid > 0:
                found.append((path, record))
            else:
                path.unlink(missing_ok=True)
        return found

    def kill_leftovers(self) -> list[ProcessRecord]:
        """SIGKILL every recorded process group that is still ours; forget all records."""
        killed = []
        for path, record in self._read():
            if record.alive():
                signal_container(record.pid, record.container_id, signal.SIGKILL)
                killed.append(record)
            elif record.container_id:  # the main process is gone; what it left behind is not
                signal_container(record.pid, record.container_id, signal.SIGKILL)
            path.unlink(missing_ok=True)
        return killed


def set_window_size(fd: int, width: int, height: int) -> None:
    """Resize the terminal ``fd`` belongs to (the process on it gets SIGWINCH)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", max(0, height), max(0, width), 0, 0))


def take_terminal() -> None:
    """In a child between fork and exec, after ``setsid``: make stdin its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@dataclass(frozen=True)
class Stdio:
    """What a container's spec says about its standard input (``stdin``, ``stdinOnce``, ``tty``)."""

    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False

    @classmethod
    def of(cls, spec: dict[str, object]) -> "Stdio":
        return cls(spec.get("stdin") is True, spec.get("stdinOnce") is True, spec.get("tty") is True)


# An attached client hears (stream, bytes) for each chunk the container prints, and
# (stream, None) when that stream ended.
OutputListener = Callable[[str, Optional[bytes]], None]


@dataclass(eq=False)
class Attachment:
    """One client attached to a running container (``kubectl attach``)."""

    process: "ContainerProcess"
    listener: OutputListener
    stdin_closed: bool = field(default=False)

    def write(self, data: bytes) -> None:
        self.process.write_stdin(data)

    def close_stdin(self) -> None:
        """The client's input ended: with ``stdinOnce``, so does the container's."""
        if not self.stdin_closed:
            self.stdin_closed = True
            if self.process.stdio.stdin_once:
                self.process.close_stdin()

    def resize(self, width: int, height: int) -> None:
        self.process.resize(width, height)

    def detach(self) -> None:
        self.process.detach(self)


class ContainerProcess:
    """One run of one container: a process group with its output pumped to a CRI log."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, log_path: Path,
                 registry: ProcessRegistry, pod_uid: str, container: str, group: ContainerGroup,
                 stdio: Stdio = Stdio(), enter: Sequence[str] = (), enter_tty: Optional[Sequence[str]] = None,
                 relay: bool = False) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.group = group
        self.stdio = stdio
        self.cwd = cwd
        self.enter = list(enter)  # the prefix that runs a process in the pod (kubectl exec's too)
        # With a terminal, where the pod's PID namespace is not ours: the prefix that makes the
        # terminal the controlling one inside (a shell there restores its foreground group).
        self.enter_tty = list(enter_tty) if enter_tty is not None else None
        # Whether ``enter``'s first process only relays its child's exit (``nsenter`` forking
        # into the pod's PID namespace): a stop signal must pass it by, or it would die at
        # once, reporting the container ended while the container's processes still drain.
        self.relay = relay
        self._attached: set[Attachment] = set()
        self._ended: list[str] = []  # output streams that reached their end
        self._stdin_lock = threading.Lock()
        self._stdin: Optional[int] = None  # the fd attached clients write to
        self._terminal: Optional[int] = None  # the pty's controlling side, with tty
        self._log = open(log_path, "ab", buffering=0)
        self._log_lock = threading.Lock()
        self._last_lines: collections.deque[bytes] = collections.deque(maxlen=TERMINATION_LOG_LINES)
        self._registry = registry
        self._pod_uid, self._container = pod_uid, container
        self.started_at = now_rfc3339()
        self.container_id = f"{pod_uid}/{container}/{time.time_ns()}"
        env = {**env, CONTAINER_ID_VARIABLE: self.container_id}
        self.env = env  # what ``kubectl exec`` runs with
        # Raises OSError (e.g. FileNotFoundError) when the command cannot be started.
        try:
            inside = stdio.tty and self.enter_tty is not None
            self._proc = self._popen([*(self.enter_tty if inside and self.enter_tty else self.enter), *argv], env, cwd,
                                     group)
        except BaseException:
            group.close()
            self._log.close()
            raise
        try:
            group.add(self._proc.pid)
            registry.add(ProcessRecord(self._proc.pid, process_start_time(self._proc.pid) or "", pod_uid, container,
                                       self.container_id))
        except (OSError, paths.OutsideDirectory):
            # A process nobody could find after a crash must not run at all.
            self.signal_group(signal.SIGKILL)
            self._proc.wait()
            group.close()
            for stream in (self._proc.stdout, self._proc.stderr, self._log):
                if stream is not None:
                    stream.close()
            raise
        outputs: list[tuple[IO[bytes] | int, str]] = [(self._terminal, "stdout")] if self._terminal is not None else [
            (stream, name) for stream, name in ((self._proc.stdout, "stdout"), (self._proc.stderr, "stderr"))
            if stream is not None]
        self.outputs = [name for _, name in outputs]
        self._pumps = [threading.Thread(target=self._pump_chunks if stdio.stdin or stdio.tty else self._pump,
                                        args=(source, name), daemon=True, name=f"log-{container}-{name}")
                       for source, name in outputs]
        for pump in self._pumps:
            pump.start()
        self.finished_at: Optional[str] = None
        self._finish_lock = threading.Lock()

    def _popen(self, argv: list[str], env: dict[str, str], cwd: str, group: ContainerGroup) -> subprocess.Popen[bytes]:
        join = group.preexec()
        if self.stdio.tty:
            self._terminal, terminal = os.openpty()
            self._stdin = self._terminal if self.stdio.stdin else None

            def preexec() -> None:
                if join is not None:
                    join()
                if self.enter_tty is None:
                    take_terminal()
            try:
                return subprocess.Popen(argv, env=env, cwd=cwd, stdin=terminal, stdout=terminal, stderr=terminal,
                                        start_new_session=True, close_fds=True, preexec_fn=preexec)
            except BaseException:
                os.close(self._terminal)
                raise
            finally:
                os.close(terminal)
        proc = subprocess.Popen(argv, env=env, cwd=cwd,
                                stdin=subprocess.PIPE if self.stdio.stdin else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                close_fds=True, preexec_fn=join)
        if proc.stdin is not None:
            self._stdin = proc.stdin.fileno()
        return proc

    @property
    def pid(self) -> int:
        return self._proc.pid

    # --- attached clients (stdin, tty) ----------------------------------------------------
    def attach(self, listener: OutputListener) -> Attachment:
        """From now on ``listener`` hears what the container prints (and at once of the
        streams that ended already)."""
        attachment = Attachment(self, listener)
        with self._log_lock:
            self._attached.add(attachment)
            ended = list(self._ended)
        for stream in ended:
            listener(stream, None)
        return attachment

    def _tell(self, stream: str, chunk: Optional[bytes]) -> None:
        """Hand ``chunk`` (None: the stream's end) to every attached client; under ``_log_lock``."""
        if chunk is None:
            self._ended.append(stream)
        for attachment in self._attached:
            attachment.listener(stream, chunk)

    def detach(self, attachment: Attachment) -> None:
        with self._log_lock:
            self._attached.discard(attachment)

    def write_stdin(self, data: bytes) -> None:
        with self._stdin_lock:
            if self._stdin is None:
                return
            with contextlib.suppress(OSError):  # the container stopped reading: it is ending
                view = memoryview(data)
                while view:
                    view = view[os.write(self._stdin, view):]

    def close_stdin(self) -> None:
        with self._stdin_lock:
            if self._stdin is None:
                return
            if self._terminal is not None:  # a terminal's input ends with ^D, as typed
                with contextlib.suppress(OSError):
                    os.write(self._terminal, b"\x04")
            elif self._proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()
            self._stdin = None

    def resize(self, width: int, height: int) -> None:
        if self._terminal is not None:
            with contextlib.suppress(OSError):
                set_window_size(self._terminal, width, height)

    def _pump_chunks(self, source: IO[bytes] | int, name: str) -> None:
        """Output as it comes, not by lines (a prompt has no newline), to the log and to
        attached clients; a terminal's controlling side reads EIO once the container is gone."""
        prefix = f" {name} ".encode()
        fd = source if isinstance(source, int) else source.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self._log_lock:
                self._tell(name, chunk or None)
                if chunk and not self._log.closed:
                    stamp = rfc3339_nano(time.time_ns()).encode()
                    lines = chunk.split(b"\n")
                    records = [stamp + prefix + b"F " + line + b"\n" for line in lines[:-1]]
                    if lines[-1]:
                        records.append(stamp + prefix + b"P " + lines[-1] + b"\n")
                    self._log.write(b"".join(records))
                    self._last_lines.extend(line + b"\n" for line in lines[:-1] if line)
            if not chunk:
                break
        if not isinstance(source, int):
            source.close()

    def _pump(self, stream: IO[bytes], name: str) -> None:
        prefix = f" {name} ".encode()
        for line in iter(stream.readline, b""):
            tag = b"F " if line.endswith(b"\n") else b"P "
            record = rfc3339_nano(time.time_ns()).encode() + prefix + tag + line.rstrip(b"\n") + b"\n"
            with self._log_lock:
                if not self._log.closed:
                    self._log.write(record)
                    self._last_lines.append(line[-TERMINATION_LOG_BYTES:])
                self._tell(name, line)
        with self._log_lock:
            self._tell(name, None)
        stream.close()

    def last_output(self) -> str:
        """The end of what the run printed (stdout and stderr in the order written), as the
        kubelet's termination message from the log: the last lines, then the last bytes."""
        with self._log_lock:
            text = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in self._last_lines)
        return text[-TERMINATION_LOG_BYTES:].decode("utf-8", errors="replace")

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """The container's exit code once it ended (and its output is flushed), else None."""
        try:
            returncode = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        # As in a container, nothing it started outlives the main process.
        self.signal_group(signal.SIGKILL)
        with self._finish_lock:  # stop() and the pod's thread may both wait; close once at a time
            self.group.close()
            for pump in self._pumps:
                pump.join(timeout=5)
            if self.finished_at is None:
                self.finished_at = now_rfc3339()
                with self._log_lock:
                    self._log.close()
                self._registry.remove(self._pod_uid, self._container)
                self.close_stdin()
                if self._terminal is not None:
                    with contextlib.suppress(OSError):
                        os.close(self._terminal)
        return exit_code(returncode)

    def oom_killed(self) -> bool:
        """Whether the run ended because it exceeded ``limits.memory`` (once it has ended)."""
        return self.group.oom_killed()

    def signal_group(self, signum: int) -> None:
        spare = self._proc.pid if self.relay and signum != signal.SIGKILL else 0
        signal_container(self._proc.pid, self.container_id, signum, spare)

    def stop(self, grace_seconds: float) -> int:
        """SIGTERM the group, wait up to the grace period, then SIGKILL; return the exit code."""
        if self._proc.poll() is None:
            self.signal_group(signal.SIGTERM)
            code = self.wait(grace_seconds)
            if code is not None:
                return code
            self.signal_group(signal.SIGKILL)
        return self.wait() or 0
