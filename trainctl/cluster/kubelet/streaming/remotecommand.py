"""``exec`` and ``attach`` over WebSocket, with the channel protocol kubectl speaks.

kubectl (1.30 on) asks for ``v5.channel.k8s.io`` first, then ``v4.channel.k8s.io``. Every
binary message starts with its channel: 0 stdin, 1 stdout, 2 stderr, 3 the outcome (a
``metav1.Status``: a non-zero exit is ``reason: NonZeroExitCode`` with the code as the
``ExitCode`` cause), 4 terminal resizes (JSON ``{"Width": w, "Height": h}``); v5 adds 255,
where ``[255, 0]`` says the client's stdin ended. A text message is read as a binary one
(its first character the channel), as kubelets read it. The outcome is written last, then the
connection closes.

An exec'd process runs as a container's process does (:mod:`..runtime`): its environment
(with the container's id, so it dies with the container), its working directory, the pod's
namespaces (the network's ``enter_argv`` prefix) and its resource group, joined before the
command runs. With ``tty`` it gets a pseudo-terminal as its controlling terminal. It is
killed when the client goes away before it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from aiohttp import WSMsgType, web
from multidict import MultiMapping

from trainctl.cluster.kubelet.runtime import Attachment, ContainerProcess, exit_code, set_window_size, take_terminal

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
READ_SIZE = 64 * 1024
SUCCESS: dict[str, Any] = {"metadata": {}, "status": "Success"}


@dataclass(frozen=True)
class Options:
    """The query of an exec or attach request (``PodExecOptions``)."""

    command: list[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    @classmethod
    def parse(cls, query: MultiMapping[str]) -> "Options":
        def flag(name: str) -> bool:
            return query.get(name, "").lower() in ("true", "1")
        tty = flag("tty")
        return cls(list(query.getall("command", [])), flag("stdin"), flag("stdout"),
                   flag("stderr") and not tty, tty)  # a terminal has one output


def exit_status(code: int, command: list[str]) -> dict[str, Any]:
    if code == 0:
        return SUCCESS
    return {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": f"command terminated with non-zero exit code: error executing command {command}, exit code {code}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def failure(error: str) -> dict[str, Any]:
    """The outcome of an exec that could not start: kube's ``InternalError`` Status, which
    kubectl prints as ``error: Internal error occurred: ...`` and exits 1."""
    return {"metadata": {}, "status": "Failure", "reason": "InternalError", "code": 500,
            "message": f"Internal error occurred: {error}", "details": {"causes": [{"message": error}]}}


def exec_failure(command: str, why: str) -> dict[str, Any]:
    return failure(f"error executing command in container: failed to exec in container: exec: {json.dumps(command)}: {why}")


def unrunnable(command: list[str], env: dict[str, str], cwd: str) -> Optional[str]:
    """Why ``command`` cannot start in a container with ``env`` and ``cwd``, as the runtime
    says it (None when it can). Looked up before the process starts: inside the pod's
    namespaces the command is started by a helper, whose own exit code (127) would stand
    for the failure."""
    program = command[0]
    if "/" not in program:
        if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
            return "executable file not found in $PATH"
        return None
    path = os.path.join(cwd, program)
    if not os.path.exists(path):
        return f"stat {program}: no such file or directory"
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        return "permission denied"
    return None


class Connection(Protocol):
    """The streams of one exec or attach, whatever carries them (WebSocket channels here,
    SPDY streams in :mod:`.spdyupgrade`)."""

    async def send(self, channel: int, data: bytes) -> None: ...

    async def finish(self, status: dict[str, Any]) -> None:
        """The outcome, then the end of the connection."""

    async def receive(self, on_stdin: Callable[[bytes], Awaitable[None]], on_stdin_closed: Callable[[], None],
                      on_resize: Callable[[int, int], None]) -> None:
        """Dispatch what the client sends until it goes away."""


class Channels:
    """The server's side of one channel connection."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self._lock = asyncio.Lock()

    async def send(self, channel: int, data: bytes) -> None:
        async with self._lock:
            if not self.ws.closed:
                with contextlib.suppress(ConnectionError):
                    await self.ws.send_bytes(bytes([channel]) + data)

    async def finish(self, status: dict[str, Any]) -> None:
        """The outcome, then the end of the connection."""
        await self.send(ERROR, json.dumps(status).encode())
        await self.ws.close()

    async def receive(self, on_stdin: Callable[[bytes], Awaitable[None]], on_stdin_closed: Callable[[], None],
                      on_resize: Callable[[int, int], None]) -> None:
        """Dispatch what the client sends until it closes the connection."""
        async for message in self.ws:
            payload = frame_payload(message.type, message.data)
            if not payload:
                continue
            channel, data = payload[0], payload[1:]
            if channel == STDIN:
                await on_stdin(data)
            elif channel == CLOSE and data[:1] == bytes([STDIN]):
                on_stdin_closed()
            elif channel == RESIZE:
                for width, height in sizes(data):
                    on_resize(width, height)


def frame_payload(kind: WSMsgType, data: Any) -> bytes:
    """A message's bytes, channel first. Text messages count as binary ones do (the Python
    client writes ``str`` stdin as text frames, ``chr(channel) + text``; kubelets take them);
    anything else (ping, close) carries no channel."""
    if kind == WSMsgType.BINARY:
        return bytes(data)
    if kind == WSMsgType.TEXT:
        return str(data).encode("utf-8")
    return b""


def sizes(data: bytes) -> list[tuple[int, int]]:
    """Every ``{"Width", "Height"}`` object in ``data`` (several may come in one message)."""
    found, text, decoder, index = [], data.decode("utf-8", "replace"), json.JSONDecoder(), 0
    while index < len(text):
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            break
        try:
            size, index = decoder.raw_decode(text, index)
        except ValueError:
            break
        if isinstance(size, dict) and isinstance(size.get("Width"), int) and isinstance(size.get("Height"), int):
            found.append((size["Width"], size["Height"]))
    return found


async def accept(request: web.BaseRequest) -> tuple[web.WebSocketResponse, Optional[Channels]]:
    """Upgrade to WebSocket with one of :data:`PROTOCOLS`; no channels when the client offers none."""
    ws = web.WebSocketResponse(protocols=PROTOCOLS, max_msg_size=0, compress=False)
    await ws.prepare(request)
    if ws.ws_protocol not in PROTOCOLS:
        await ws.close(message=b"no supported subprotocol: offer v5.channel.k8s.io or v4.channel.k8s.io")
        return ws, None
    return ws, Channels(ws)


async def _ready(fd: int, writing: bool) -> None:
    """Until a non-blocking fd can be read (or written)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)
    (loop.add_writer if writing else loop.add_reader)(fd, wake)
    try:
        await ready
    finally:
        (loop.remove_writer if writing else loop.remove_reader)(fd)


async def _read_fd(fd: int) -> bytes:
    """One read of a non-blocking fd, waiting until it is readable; b"" at its end (a
    terminal's controlling side reads EIO once the other side is closed)."""
    while True:
        try:
            return os.read(fd, READ_SIZE)
        except BlockingIOError:
            await _ready(fd, writing=False)
        except OSError:
            return b""


async def _write_fd(fd: int, data: bytes) -> None:
    """All of ``data`` to a non-blocking fd, waiting while it is full (a paste into a terminal)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            await _ready(fd, writing=True)


async def _pump(read: Callable[[], Awaitable[bytes]], channels: Connection, channel: int) -> None:
    while chunk := await read():
        await channels.send(channel, chunk)


async def _spawn(argv: list[str], container: ContainerProcess,
                 options: Options) -> tuple[asyncio.subprocess.Process, int | None]:
    """Start ``argv`` in the container's group, on a new terminal (returned) or on pipes."""
    group = container.group
    join = group.preexec()  # opened now, written by the child before it runs anything
    if not options.tty:
        pipe, quiet = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        child = await asyncio.create_subprocess_exec(
            *argv, stdin=pipe if options.stdin else quiet, stdout=pipe if options.stdout else quiet,
            stderr=pipe if options.stderr else quiet, env=container.env, cwd=container.cwd,
            start_new_session=True, preexec_fn=join)
        group.join(child.pid)
        return child, None
    terminal, tty = os.openpty()

    def preexec() -> None:
        if join is not None:
            join()
        if container.enter_tty is None:
            take_terminal()
    try:
        os.set_blocking(terminal, False)
        child = await asyncio.create_subprocess_exec(
            *argv, stdin=tty, stdout=tty, stderr=tty, env=container.env, cwd=container.cwd,
            start_new_session=True, preexec_fn=preexec)
        group.join(child.pid)
    except BaseException:
        os.close(terminal)
        raise
    finally:
        os.close(tty)
    return child, terminal


async def run_exec(channels: Connection, container: ContainerProcess, enter: list[str], options: Options) -> None:
    why = unrunnable(options.command, container.env, container.cwd)
    if why is not None:
        await channels.finish(exec_failure(options.command[0], why))
        return
    try:
        if options.tty and container.enter_tty is not None:  # the pod's sandbox takes the terminal itself
            enter = container.enter_tty
        child, terminal = await _spawn(enter + options.command, container, options)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        await channels.finish(exec_failure(options.command[0], str(reason).lower()))
        return

    pumps: list[asyncio.Task[None]] = []
    if terminal is not None:
        fd = terminal
        pumps.append(asyncio.create_task(_pump(lambda: _read_fd(fd), channels, STDOUT)))
    else:
        for stream, channel in ((child.stdout, STDOUT), (child.stderr, STDERR)):
            if stream is not None:
                pumps.append(asyncio.create_task(_pump(functools.partial(stream.read, READ_SIZE), channels, channel)))

    async def write(data: bytes) -> None:
        if terminal is not None:
            with contextlib.suppress(OSError):  # the terminal is gone: the command ended
                await _write_fd(terminal, data)
        elif child.stdin is not None and not child.stdin.is_closing():
            child.stdin.write(data)
            with contextlib.suppress(ConnectionError):
                await child.stdin.drain()

    def close_stdin() -> None:
        if terminal is not None:
            with contextlib.suppress(OSError):
                os.write(terminal, b"\x04")
        elif child.stdin is not None:
            child.stdin.close()

    def resize(width: int, height: int) -> None:
        if terminal is not None:
            with contextlib.suppress(OSError):
                set_window_size(terminal, width, height)

    client = asyncio.create_task(channels.receive(write, close_stdin, resize))
    finished = asyncio.create_task(child.wait())
    try:
        await asyncio.wait([client, finished], return_when=asyncio.FIRST_COMPLETED)
        if not finished.done():  # the client went away: so does its command
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
        code = await finished
        await asyncio.gather(*pumps, return_exceptions=True)
        await channels.finish(exit_status(exit_code(code), options.command))
    finally:
        for task in (client, *pumps):
            task.cancel()
        if terminal is not None:
            os.close(terminal)


async def run_attach(channels: Connection, container: ContainerProcess, options: Options) -> None:
    loop = asyncio.get_running_loop()
    output: asyncio.Queue[tuple[str, Optional[bytes]]] = asyncio.Queue()
    def heard(stream: str, chunk: Optional[bytes]) -> None:  # on the container's output threads
        loop.call_soon_threadsafe(output.put_nowait, (stream, chunk))

    attachment: Attachment = container.attach(heard)
    streams = len(container.outputs)

    async def write(data: bytes) -> None:
        if options.stdin:
            await asyncio.to_thread(attachment.write, data)

    client = asyncio.create_task(channels.receive(write, attachment.close_stdin, attachment.resize))

    async def relay() -> None:
        ended = 0
        while ended < streams:
            stream, chunk = await output.get()
            if chunk is None:
                ended += 1
            elif stream == "stdout" and options.stdout:
                await channels.send(STDOUT, chunk)
            elif stream == "stderr" and options.stderr:
                await channels.send(STDERR, chunk)

    relaying = asyncio.create_task(relay())
    try:
        await asyncio.wait([client, relaying], return_when=asyncio.FIRST_COMPLETED)
        if relaying.done():  # the container ended
            await channels.finish(SUCCESS)
        elif options.stdin:  # the client left: its input ended with it
            attachment.close_stdin()
    finally:
        attachment.detach()
        for task in (client, relaying):
            task.cancel()
