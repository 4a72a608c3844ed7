"""Watch streams: ``?watch=true`` on a collection, as newline-delimited JSON events.

A watch without a resourceVersion starts with the current objects as ADDED events; one
with a version resumes from the store's history (410 Expired when that is gone); one
from a version the server has not reached yet waits a few seconds for it, then gets 504
"Too large resource version". Idle
watches that allow them get BOOKMARK events, and ``sendInitialEvents`` ends the initial
list with the ``k8s.io/initial-events-end`` bookmark.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from aiohttp import web

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType
from trainctl.cluster.apiserver.serving import params, tables
from trainctl.cluster.apiserver.serving.responses import JSON
from trainctl.cluster.apiserver.storage.store import Event, Store

Obj = dict[str, Any]
FUTURE_RV_WAIT_SECONDS = 3.0  # how long a watch from a version not yet reached waits for it, as kube-apiserver does
MAX_EVENTS_PER_WRITE = 500


def event_line(rtype: ResourceType, event: Event, include: str | None) -> bytes:
    obj = rtype.view(event.obj)
    if include is not None:
        obj = tables.table(rtype, [obj], include, {"resourceVersion": obj["metadata"]["resourceVersion"]})
    return orjson.dumps({"type": event.type, "object": obj}) + b"\n"


def bookmark(rtype: ResourceType, rv: int, initial_end: bool = False) -> bytes:
    meta: Obj = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return orjson.dumps({"type": "BOOKMARK", "object": {"kind": rtype.kind, "apiVersion": rtype.api_version,
                                                        "metadata": meta}}) + b"\n"


async def stream(request: web.BaseRequest, rtype: ResourceType, namespace: str | None, store: Store, *,
                 bookmark_interval: float) -> web.StreamResponse:
    """Answer a watch request: stream events until it times out, the client goes, the
    watcher falls too far behind or the server stops."""
    query = request.query
    matches = params.matcher(query, rtype)
    include = params.table_include(request.headers.get("Accept", ""), query)
    bookmarks = params.go_bool(query, "allowWatchBookmarks")
    timeout = params.int_param(query, "timeoutSeconds")
    rv_text = query.get("resourceVersion", "")
    try:
        since = None if rv_text in ("", "0") else int(rv_text)
    except ValueError:
        raise errors.bad_request(f'invalid resource version "{rv_text}"') from None
    if since is not None and not await store.wait_for_rv(since, FUTURE_RV_WAIT_SECONDS):
        raise errors.too_large_resource_version(since, store.published_rv)
    response = web.StreamResponse(headers={"Content-Type": JSON, "Cache-Control": "no-cache, private"})
    response.enable_chunked_encoding()
    try:
        watcher = store.watch(rtype.storage_key, namespace, matches, since)
    except errors.ApiError as exc:
        await response.prepare(request)
        await response.write(orjson.dumps({"type": "ERROR", "object": exc.status()}) + b"\n")
        await response.write_eof()
        return response
    deadline = time.monotonic() + timeout if timeout and timeout > 0 else None
    sent_rv = watcher.since  # every event up to here was sent (or did not match)
    fell_behind = False
    try:
        await response.prepare(request)
        if since is None:
            initial = [obj for obj in store.read_list(rtype.storage_key, namespace) if matches(obj)]
            for start in range(0, len(initial), MAX_EVENTS_PER_WRITE):
                await response.write(b"".join(event_line(rtype, Event(0, "ADDED", rtype.storage_key, obj, None), include)
                                              for obj in initial[start:start + MAX_EVENTS_PER_WRITE]))
            if bookmarks and params.go_bool(query, "sendInitialEvents"):
                await response.write(bookmark(rtype, watcher.since, initial_end=True))
        while True:
            wait = bookmark_interval
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    break
            try:
                event = watcher.queue.get_nowait() if not watcher.queue.empty() else \
                    await asyncio.wait_for(watcher.queue.get(), wait)
            except asyncio.TimeoutError:
                if bookmarks and (deadline is None or deadline - time.monotonic() > 0.001):
                    await response.write(bookmark(rtype, store.published_rv))
                continue
            # Everything queued goes out in one write: one TLS record and one send for a
            # burst of events (a group commit publishes hundreds at once), not one per event.
            lines, last_rv = [], sent_rv
            while event is not None:
                lines.append(event_line(rtype, event, include))
                last_rv = event.rv
                if watcher.queue.empty() or len(lines) >= MAX_EVENTS_PER_WRITE:
                    break
                event = watcher.queue.get_nowait()
            fell_behind = event is None  # the watcher fell too far behind, or the server is stopping
            if lines:
                await response.write(b"".join(lines))
                sent_rv = last_rv
            if fell_behind:
                break
        if bookmarks:
            # The last bookmark must not claim events still queued (a slow client at its
            # deadline, or one that fell behind): it would re-watch past them, and lose them.
            caught_up = watcher.queue.empty() and not fell_behind
            await response.write(bookmark(rtype, store.published_rv if caught_up else sent_rv))
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away
    finally:
        store.stop_watch(watcher)
    return response
