"""The object store: every object in memory, every acknowledged write in SQLite, and the
recent history for watches.

Why this shape: one process owns the data, so the in-memory map is the truth that reads,
lists, selectors and optimistic-concurrency checks use without touching disk, and SQLite
(WAL) only has to make writes durable. Writes are group-committed: a write changes memory
at once (so that the next write's checks see it), joins the batch that the next commit
carries, and its caller is answered (and watchers are told) only when that batch is
committed. Clients read the durable state (``read``, ``read_list``, ``committed_rv``):
while a write waits for its commit, the object's previous state is kept aside for them. A kill -9 therefore never loses an acknowledged write. When a commit fails
(disk full, I/O error) the batch, and every write queued after it, which may build on
it, is undone in memory, so a failed write leaves no trace: its callers get the storage
error, watchers never hear of it, and resourceVersion steps back. By default commits are not fsynced (``synchronous=NORMAL``: the WAL is
in the kernel's hands, which survives the process but not a power cut) and run on the event
loop; with ``fsync=True`` every batch is fsynced (``synchronous=FULL``) on a writer thread,
so that slow disks do not stall the loop.

resourceVersion is one global integer, persisted with each batch, so it keeps increasing
across restarts. Watches resume from an in-memory window of recent events; a version older
than the window (and after a restart, any version from before it) is 410 Expired, which
makes clients relist, as with a compacted etcd.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import concurrent.futures
import contextlib
import errno
import logging
import os
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson

from trainctl.cluster.apiserver.apimachinery import errors, request_limits

Obj = dict[str, Any]
log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    resource TEXT NOT NULL,      -- storage key: "<group>/<plural>"
    namespace TEXT NOT NULL,     -- "" for cluster-scoped objects
    name TEXT NOT NULL,
    rv INTEGER NOT NULL,
    data BLOB NOT NULL,          -- the object as JSON
    PRIMARY KEY (resource, namespace, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


@dataclass(slots=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str
    obj: Obj
    prev: Obj | None


@dataclass(eq=False)
class Watcher:
    """One open watch: its filter and the queue the store feeds."""

    resource: str
    namespace: str | None
    matches: Callable[[Obj], bool]
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)
    since: int = 0
    max_backlog: int = 50_000

    def offer(self, event: Event) -> None:
        if event.rv <= self.since:
            return  # already part of the list the client started from
        if self.namespace is not None and event.obj["metadata"].get("namespace") != self.namespace:
            return
        now = self.matches(event.obj)
        before = event.prev is not None and event.type == "MODIFIED" and self.matches(event.prev)
        if event.type == "MODIFIED" and now != before:
            # An object entering or leaving the selection is an add or a delete to this watcher;
            # one that leaves is reported as it was when it last matched.
            if now:
                event = Event(event.rv, "ADDED", event.resource, event.obj, None)
            else:
                assert event.prev is not None
                last = {**event.prev, "metadata": {**event.prev["metadata"], "resourceVersion": str(event.rv)}}
                event = Event(event.rv, "DELETED", event.resource, last, None)
            now = True
        if not now:
            return
        if self.queue.qsize() >= self.max_backlog:
            self.queue.put_nowait(None)  # too slow: end the watch, the client re-watches
            return
        self.queue.put_nowait(event)


def clone(obj: Any) -> Any:
    """A deep copy to change (stored objects are shared, never changed in place); orjson's
    round trip is several times faster than copy.deepcopy."""
    return orjson.loads(orjson.dumps(obj))


# SQLite's result code for a full disk or database; sqlite3 names it (and sets
# ``sqlite_errorcode``) only from Python 3.11 on.
SQLITE_FULL = 13


def storage_error(exc: BaseException) -> errors.ApiError:
    """What a client is told when a write could not be made durable."""
    full = (isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL
            or isinstance(exc, OSError) and exc.errno == errno.ENOSPC)
    if full:
        return errors.internal(f"storage is full: {exc}; the write was not made", 507)
    return errors.internal(f"storage error: {exc}; the write was not made")


def _loaded(data: bytes) -> Obj | None:
    """A stored row as an object, or None when it cannot be decoded or served."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return None
    if request_limits.depth_of(obj) > request_limits.MAX_DEPTH:
        return None
    return cast("dict[str, Any] | None", obj)


def object_key(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


class Store:
    def __init__(self, path: Path, window: int = 10_000, fsync: bool = False) -> None:
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))  # the WAL and SHM files inherit this
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
        self._fsync = fsync
        self._db.executescript(_SCHEMA)
        self._objects: dict[str, dict[tuple[str, str], Obj]] = collections.defaultdict(dict)
        self._by_uid: dict[str, tuple[str, str, str]] = {}
        self._dependents: dict[str, set[tuple[str, str, str]]] = collections.defaultdict(set)
        row = self._db.execute("SELECT value FROM meta WHERE key = 'rv'").fetchone()
        self.rv: int = row[0] if row else 0
        for resource, namespace, name, data in self._db.execute("SELECT resource, namespace, name, data FROM objects"):
            obj = _loaded(data)
            if obj is None:
                # One damaged or unservable row must not break reads of everything else.
                log.warning("state.db: skipping %s %s/%s: it cannot be read or served", resource, namespace, name)
                continue
            self._objects[resource][object_key(obj)] = obj
            self._index(resource, obj)
        # A restart starts a new history: step the version once, so that every version handed
        # out before is older than what watches can resume from (410, relist), while a list
        # made now returns a version that can be watched.
        self.rv += 1
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('rv', ?)", (self.rv,))
        self._committed_rv = self.rv
        # Per resource: the durable state of the keys with writes waiting for a commit (None: absent).
        self._durable: dict[str, dict[tuple[str, str], Obj | None]] = collections.defaultdict(dict)
        self._window_start = self.rv
        self._rv_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._history: collections.deque[Event] = collections.deque(maxlen=window)
        self._watchers: dict[str, set[Watcher]] = collections.defaultdict(set)
        self._pending: list[tuple[Event, asyncio.Future[None]]] = []
        self._flushing = False
        self._flusher: asyncio.Task[None] | None = None
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
        # Why the last commit failed ("" once one succeeds): the readiness checks' "etcd".
        self.write_error = ""

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        self._db.close()

    # --- reads --------------------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self._objects[resource].get((namespace, name))

    # Past this method, ``list`` in an annotation means it: they spell the type ``builtins.list``.
    def list(self, resource: str, namespace: str | None = None) -> list[Obj]:
        items = self._objects[resource]
        if namespace is None:
            keys = sorted(items)
        else:
            keys = sorted(k for k in items if k[0] == namespace)
        return [items[k] for k in keys]

    def read(self, resource: str, namespace: str, name: str) -> Obj | None:
        """The object as last made durable: what clients may see."""
        durable = self._durable.get(resource)
        if durable and (namespace, name) in durable:
            return durable[(namespace, name)]
        return self._objects[resource].get((namespace, name))

    def read_list(self, resource: str, namespace: str | None = None) -> builtins.list[Obj]:
        """``list`` as last made durable."""
        durable = self._durable.get(resource)
        if not durable:
            return self.list(resource, namespace)
        items = dict(self._objects[resource])
        for key, obj in durable.items():
            if obj is None:
                items.pop(key, None)
            else:
                items[key] = obj
        return [items[k] for k in sorted(items) if namespace is None or k[0] == namespace]

    @property
    def committed_rv(self) -> int:
        """The newest durable version."""
        return self._committed_rv

    def count(self, resource: str) -> int:
        return len(self._objects[resource])

    def by_uid(self, uid: str) -> tuple[str, str, str] | None:
        return self._by_uid.get(uid)

    def dependents(self, uid: str) -> builtins.list[tuple[str, str, str]]:
        return sorted(self._dependents.get(uid, ()))

    def namespaced_resources(self, namespace: str) -> Iterable[tuple[str, Obj]]:
        for resource, items in list(self._objects.items()):
            for (ns, _), obj in list(items.items()):
                if ns == namespace:
                    yield resource, obj

    # --- writes -------------------------------------------------------------------------

    def put(self, resource: str, obj: Obj) -> asyncio.Future[None]:
        """Store ``obj`` (created or replaced) under a fresh resourceVersion.

        The caller hands over ``obj``: it must not change it afterwards. The future resolves
        when the write is durable.
        """
        key = object_key(obj)
        prev = self._objects[resource].get(key)
        self._durable[resource].setdefault(key, prev)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._objects[resource][key] = obj
        if prev is not None:
            self._unindex(resource, prev)
        self._index(resource, obj)
        return self._enqueue(Event(self.rv, "MODIFIED" if prev else "ADDED", resource, obj, prev))

    def remove(self, resource: str, obj: Obj) -> asyncio.Future[None]:
        key = object_key(obj)
        prev = self._objects[resource].pop(key)
        self._durable[resource].setdefault(key, prev)
        self._unindex(resource, prev)
        self.rv += 1
        gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        return self._enqueue(Event(self.rv, "DELETED", resource, gone, prev))

    def _index(self, resource: str, obj: Obj) -> None:
        meta = obj["metadata"]
        ref = (resource, meta.get("namespace") or "", meta["name"])
        if uid := meta.get("uid"):
            self._by_uid[uid] = ref
        for owner in meta.get("ownerReferences") or ():
            self._dependents[owner.get("uid", "")].add(ref)

    def _unindex(self, resource: str, obj: Obj) -> None:
        meta = obj["metadata"]
        ref = (resource, meta.get("namespace") or "", meta["name"])
        if (uid := meta.get("uid")) and self._by_uid.get(uid) == ref:
            del self._by_uid[uid]
        for owner in meta.get("ownerReferences") or ():
            refs = self._dependents.get(owner.get("uid", ""))
            if refs is not None:
                refs.discard(ref)
                if not refs:
                    del self._dependents[owner.get("uid", "")]

    def _enqueue(self, event: Event) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((event, done))
        if not self._flushing:
            self._flushing = True
            self._flusher = loop.create_task(self._flush())  # held: the loop keeps only a weak reference
        return done

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    events = [e for e, _ in batch]
                    if self._fsync:
                        await loop.run_in_executor(self._writer, self._persist, events)
                    else:
                        self._persist(events)
                except Exception as exc:  # disk full, I/O error: fail the callers, keep serving
                    self.write_error = str(exc) or type(exc).__name__
                    self._undo(batch + self._pending, storage_error(exc))
                    self._pending = []
                    continue
                self._committed_rv = events[-1].rv
                self.write_error = ""
                self._made_durable(events)
                for event, done in batch:
                    self._publish(event)
                    if not done.done():
                        done.set_result(None)
                self._wake_rv_waiters()
        finally:
            self._flushing = False

    def _persist(self, batch: builtins.list[Event]) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            # Order matters when one batch deletes and re-creates the same name.
            for event in batch:
                namespace, name = object_key(event.obj)
                if event.type == "DELETED":
                    db.execute(
                        "DELETE FROM objects WHERE resource = ? AND namespace = ? AND name = ?",
                        (event.resource, namespace, name),
                    )
                else:
                    db.execute(
                        "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?)",
                        (event.resource, namespace, name, event.rv, orjson.dumps(event.obj)),
                    )
            db.execute("INSERT OR REPLACE INTO meta VALUES ('rv', ?)", (batch[-1].rv,))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # a failed COMMIT may already have rolled back
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    def _made_durable(self, events: builtins.list[Event]) -> None:
        """Forget the durable state kept aside for keys no write is waiting on any more."""
        waiting = {(e.resource, object_key(e.obj)) for e, _ in self._pending}
        for event in events:
            key = object_key(event.obj)
            durable = self._durable[event.resource]
            if (event.resource, key) in waiting:
                durable[key] = None if event.type == "DELETED" else event.obj
            else:
                durable.pop(key, None)

    def _undo(self, failed: builtins.list[tuple[Event, asyncio.Future[None]]], error: errors.ApiError) -> None:
        """Take back writes that could not be made durable, newest first, and fail their callers."""
        for event, _ in reversed(failed):
            objects = self._objects[event.resource]
            key = object_key(event.obj)
            current = objects.pop(key, None)
            if current is not None:
                self._unindex(event.resource, current)
            if event.prev is not None:
                objects[key] = event.prev
                self._index(event.resource, event.prev)
        self.rv = self._committed_rv
        self._durable.clear()  # memory is the durable state again
        for _, done in failed:
            if not done.done():
                done.set_exception(error)

    # --- watch --------------------------------------------------------------------------

    def _publish(self, event: Event) -> None:
        self._history.append(event)
        for watcher in self._watchers.get(event.resource, ()):
            watcher.offer(event)

    @property
    def oldest_resumable(self) -> int:
        if len(self._history) == self._history.maxlen:
            return self._history[0].rv - 1
        return self._window_start

    @property
    def published_rv(self) -> int:
        """The newest version every watcher has been told about."""
        return self._history[-1].rv if self._history else self._window_start

    async def wait_for_rv(self, rv: int, timeout: float) -> bool:
        """Wait until version ``rv`` is committed and published; False if it was not within ``timeout``."""
        if rv <= self._committed_rv:
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._rv_waiters.append((rv, waiter))
        try:
            await asyncio.wait_for(waiter, timeout)
        except asyncio.TimeoutError:
            return False
        finally:
            self._rv_waiters = [(r, w) for r, w in self._rv_waiters if w is not waiter]
        return True

    def _wake_rv_waiters(self) -> None:
        for rv, waiter in self._rv_waiters:
            if rv <= self._committed_rv and not waiter.done():
                waiter.set_result(None)

    def watch(self, resource: str, namespace: str | None, matches: Callable[[Obj], bool], since: int | None) -> Watcher:
        """Open a watch; events after ``since`` (None: from now) are replayed first."""
        watcher = Watcher(resource, namespace, matches, since=self._committed_rv if since is None else since)
        if since is not None:
            if since < self.oldest_resumable:
                raise errors.expired(since)
            for event in self._history:
                if event.rv > since and event.resource == resource:
                    watcher.offer(event)
        self._watchers[resource].add(watcher)
        return watcher

    def stop_watch(self, watcher: Watcher) -> None:
        self._watchers[watcher.resource].discard(watcher)

    def end_watches(self) -> None:
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.queue.put_nowait(None)

    def watcher_count(self) -> int:
        return sum(len(w) for w in self._watchers.values())
