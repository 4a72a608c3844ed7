"""``pods/log``: container output, read from the files the kubelet writes.

The kubelet writes ``<dir>/pods/<pod-uid>/<container>/<restartCount>.log`` in the CRI log
format, one record per line: ``<RFC3339Nano time> <stdout|stderr> <P|F> <text>`` (``P`` marks
a partial line continued by the next record). This module turns those records back into
the text ``kubectl logs`` shows, with the query parameters of the real endpoint:
``container``, ``previous``, ``tailLines``, ``timestamps``, ``sinceSeconds``, ``sinceTime``,
``limitBytes`` and ``follow`` (stream until the container has terminated or the pod is
gone). A container waiting to restart (``CrashLoopBackOff``) shows the run that ended, as
the real kubelet's does.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, cast

from aiohttp import web

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.serving import params

Obj = dict[str, Any]
FOLLOW_POLL_SECONDS = 0.1


@dataclass
class LogOptions:
    container: str = ""
    previous: bool = False
    follow: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    since: datetime | None = None
    limit_bytes: int | None = None


def parse_time(text: str) -> datetime | None:
    """RFC 3339 with up to nanosecond precision (Python keeps microseconds)."""
    try:
        head, dot, rest = text.partition(".")
        if dot:
            digits = "".join(ch for ch in rest if ch.isdigit())
            zone = rest[len(digits):]
            text = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _container_status(pod: Obj, container: str) -> Obj:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(key) or []:
            if cs.get("name") == container:
                return cast("dict[str, Any]", cs)
    return {}


def choose_container(pod: Obj, requested: str) -> str:
    spec = pod.get("spec") or {}
    containers: list[str] = [c.get("name") for c in spec.get("containers") or []]
    init: list[str] = [c.get("name") for c in spec.get("initContainers") or []]
    ephemeral: list[str] = [c.get("name") for c in spec.get("ephemeralContainers") or []]
    name = pod["metadata"]["name"]
    if not requested:
        default = (pod["metadata"].get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
        if default in containers:
            return str(default)
        if not containers:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        return containers[0]
    if requested not in containers and requested not in init and requested not in ephemeral:
        choices = f"choose one of: [{' '.join(containers)}]"
        if init:
            choices += f" or one of the init containers: [{' '.join(init)}]"
        if ephemeral:
            choices += f" or one of the ephemeral containers: [{' '.join(ephemeral)}]"
        raise errors.bad_request(f"container {requested} is not valid for pod {name}, {choices}")
    return requested


def _ended(status: Obj) -> bool:
    """The container waits (CrashLoopBackOff, or the next run's set-up) after a run that
    ended: ``restartCount`` still names that run, as the real kubelet reports it."""
    return "waiting" in (status.get("state") or {}) and "terminated" in (status.get("lastState") or {})


def log_file(root: Path, pod: Obj, options: LogOptions) -> Path:
    """The file of the run the real kubelet would read: the current one, or the last that
    ended while the container waits to restart; with ``previous``, the last that ended."""
    container = options.container
    status = _container_status(pod, container)
    restarts = int(status.get("restartCount", 0) or 0)
    attempt = restarts - 1 if options.previous and not _ended(status) else restarts
    name = pod["metadata"]["name"]
    if attempt < 0:
        raise errors.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
    return root / "pods" / str(pod["metadata"]["uid"]) / container / f"{attempt}.log"


def _render(record: bytes, options: LogOptions, pending: list[bytes]) -> tuple[bytes | None, datetime | None]:
    """One CRI record to output text (None while a partial line continues)."""
    parts = record.rstrip(b"\n").split(b" ", 3)
    if len(parts) < 3:
        return None, None
    stamp = parts[0].decode(errors="replace")
    tag = parts[2]
    text = parts[3] if len(parts) > 3 else b""
    when = parse_time(stamp)
    if tag == b"P":
        pending.append(text)
        return None, when
    line = b"".join(pending) + text + b"\n"
    pending.clear()
    if options.timestamps:
        line = stamp.encode() + b" " + line
    return line, when


def _terminated(pod: Obj | None, options: LogOptions, attempt_path: Path) -> bool:
    if pod is None:
        return True
    status = _container_status(pod, options.container)
    if int(status.get("restartCount", 0) or 0) > int(attempt_path.stem):
        return True  # a newer attempt writes another file
    if _ended(status):
        return True  # this file is the last run's, which ended
    if "terminated" in (status.get("state") or {}):
        return True
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


async def stream(root: Path, pod: Obj, options: LogOptions, current_pod: Callable[[], Obj | None]) -> AsyncIterator[bytes]:
    """The log text; with ``follow`` it keeps reading until the container has stopped."""
    path = log_file(root, pod, options)
    if not path.exists() and not options.follow:
        if (pod.get("status") or {}).get("phase", "Pending") == "Pending":
            raise errors.bad_request(
                f'container "{options.container}" in pod "{pod["metadata"]["name"]}" is waiting to start: ContainerCreating')
        return
    budget = options.limit_bytes
    pending: list[bytes] = []

    def accept(line: bytes | None, when: datetime | None) -> bytes | None:
        if line is None:
            return None
        if options.since is not None and when is not None and when < options.since:
            return None
        return line

    def within_budget(line: bytes) -> bytes | None:
        """``line`` cut to what limitBytes still allows; None once it is spent."""
        nonlocal budget
        if budget is None:
            return line
        if budget <= 0:
            return None
        line, budget = line[:budget], budget - len(line[:budget])
        return line

    while options.follow and not path.exists():
        if _terminated(current_pod(), options, path):
            return
        await asyncio.sleep(FOLLOW_POLL_SECONDS)
    with path.open("rb") as handle:
        # tailLines keeps only the last lines in memory; otherwise lines stream as they are read.
        tail: collections.deque[bytes] | None = (
            collections.deque(maxlen=max(options.tail_lines, 0)) if options.tail_lines is not None else None)
        while True:
            record = handle.readline()
            if not record.endswith(b"\n"):
                handle.seek(-len(record), 1)  # nothing more, or a record still being written
                break
            line = accept(*_render(record, options, pending))
            if line is None:
                continue
            if tail is not None:
                tail.append(line)
                continue
            if (line := within_budget(line)) is None:
                return
            yield line
        for line in tail or ():
            if (line := within_budget(line)) is None:
                return
            yield line
        while options.follow:
            record = handle.readline()
            if record.endswith(b"\n"):
                line = accept(*_render(record, options, pending))
                if line is not None:
                    if (line := within_budget(line)) is None:
                        return
                    yield line
                continue
            handle.seek(-len(record), 1)
            if _terminated(current_pod(), options, path):
                for rest in handle.read().splitlines(keepends=True):
                    line = accept(*_render(rest if rest.endswith(b"\n") else rest + b"\n", options, pending))
                    if line is not None and (line := within_budget(line)) is not None:
                        yield line
                return
            await asyncio.sleep(FOLLOW_POLL_SECONDS)


def since_from(seconds: int | None, since_time: str | None) -> datetime | None:
    if seconds is not None:
        return datetime.now(timezone.utc) - timedelta(seconds=seconds)
    if since_time:
        parsed = parse_time(since_time)
        if parsed is None:
            raise errors.bad_request(f"invalid sinceTime {since_time!r}")
        return parsed
    return None


async def respond(request: web.BaseRequest, pod: Obj, data_dir: Path,
                  current: Callable[[], Obj | None]) -> web.StreamResponse:
    """Answer a ``pods/log`` request for ``pod``; ``current`` is the pod as stored now (None
    once it is gone or the server is stopping), which ends a followed stream."""
    query = request.query
    options = LogOptions(
        container=choose_container(pod, query.get("container", "")),
        previous=params.go_bool(query, "previous"),
        follow=params.go_bool(query, "follow"),
        timestamps=params.go_bool(query, "timestamps"),
        tail_lines=params.int_param(query, "tailLines"),
        since=since_from(params.int_param(query, "sinceSeconds"), query.get("sinceTime")),
        limit_bytes=params.int_param(query, "limitBytes"),
    )
    chunks = stream(data_dir, pod, options, current)
    first = await anext(chunks, None)  # errors (container not started ...) become a Status
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    if options.follow:
        response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        if first is not None:
            await response.write(first)
            async for chunk in chunks:
                await response.write(chunk)
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away
    return response
