"""Kubernetes Events about jobs (``core/v1``), as ``kubectl describe`` shows them, bounded.

A 500-worker job creates a thousand children, and each create is an Event as in the
reference operator and the Job controller. Kubernetes keeps that volume bounded on the
client side, in client-go's ``EventCorrelator``; this module applies the same three rules:

- **similar events are combined**: events that differ only in their message (same object,
  source, type and reason) are counted per 10-minute window; from the 10th distinct
  message on they go to one Event whose message starts ``(combined from similar events):``;
- **repeats are counted**: an event identical to one already written (message included)
  PATCHes that Event's ``count``, ``lastTimestamp`` and ``message`` instead of creating one;
- **spam is dropped**: each source+object+type+reason has a token bucket of 25 writes
  refilled at one per 5 minutes; an event without a token is not written (its repeat count
  still grows, so the next write carries it). The reason is part of the key, as in current
  client-go, so a flood of ``SuccessfulCreatePod`` never starves the job's
  ``PyTorchJobSucceeded``.

So one object costs at most 25 Event writes per reason at once and one per reason per 5
minutes after that, however many children it has. Like client-go's ``core/v1`` recorder, the Event's ``count``
and ``lastTimestamp`` carry the repeats (``series`` belongs to ``events.k8s.io`` Events,
which ``kubectl describe`` reads with ``eventTime``, not set here).

:class:`EventCorrelator` is the pure part (the time is an argument); :class:`EventRecorder`
does the writes. An Event that cannot be written is logged and dropped; it never fails a
reconcile.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Generic, Optional, Protocol, TypeVar

from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import EVENTS

log = logging.getLogger("trainctl.controller.events")

COMBINED_PREFIX = "(combined from similar events): "


class EventLike(Protocol):
    """What the recorder needs of an Event: the controller's plans and the control plane's
    decisions each carry their own, with these three fields."""

    @property
    def type(self) -> str: ...  # "Normal" or "Warning"

    @property
    def reason(self) -> str: ...

    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class Event:
    """An Event for components that have no type of their own for it."""

    type: str
    reason: str
    message: str

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class CorrelatorLimits:
    """client-go's defaults (``tools/record``)."""

    max_similar: int = 10  # distinct messages per object+reason before they are combined
    similar_window_seconds: float = 600.0
    burst: int = 25  # writes per source+object+type+reason at once
    refill_seconds: float = 300.0  # one more write per this many seconds
    cache_size: int = 4096  # keys remembered per rule (least recently used go first)


@dataclass(frozen=True)
class Write:
    """One Event write: ``patch`` None creates ``event``; else PATCH it onto ``event``'s name."""

    event: dict[str, Any]
    patch: Optional[dict[str, Any]] = None


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> Optional[V]:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)


@dataclass
class _Similar:
    messages: set[str]
    last: float


@dataclass
class _Seen:
    count: int
    first_timestamp: str
    name: str


@dataclass
class _Bucket:
    tokens: float
    last: float


def _source_and_object(event: dict[str, Any]) -> tuple[str, ...]:
    source, involved = event.get("source") or {}, event.get("involvedObject") or {}
    return (
        source.get("component", ""), source.get("host", ""),
        involved.get("kind", ""), involved.get("namespace", ""), involved.get("name", ""),
        involved.get("uid", ""), involved.get("apiVersion", ""),
    )  # fmt: skip


def similar_key(event: dict[str, Any]) -> tuple[str, ...]:
    """Events alike but for their message."""
    reporting = (event.get("reportingComponent", ""), event.get("reportingInstance", ""))
    return (*_source_and_object(event), event.get("type", ""), event.get("reason", ""), *reporting)


def identity_key(event: dict[str, Any]) -> tuple[str, ...]:
    """Events that are the same event again."""
    field_path = (event.get("involvedObject") or {}).get("fieldPath", "")
    return (*_source_and_object(event), field_path, event.get("type", ""), event.get("reason", ""), event.get("message", ""))


def _seconds(now: datetime) -> float:
    return now.timestamp()


def _stamp(now: datetime) -> str:
    return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventCorrelator:
    """Decides, for each Event about to be recorded, whether and how it is written.

    Not thread-safe: :class:`EventRecorder` serialises the calls.
    """

    def __init__(self, limits: CorrelatorLimits = CorrelatorLimits(), *, new_name: Optional[Callable[[str], str]] = None) -> None:
        self.limits = limits
        self._new_name = new_name or (lambda involved: f"{involved}.{uuid.uuid4().hex[:16]}")
        self._similar: _Lru[tuple[str, ...], _Similar] = _Lru(limits.cache_size)
        self._seen: _Lru[Any, _Seen] = _Lru(limits.cache_size)
        self._buckets: _Lru[tuple[str, ...], _Bucket] = _Lru(limits.cache_size)

    def correlate(self, event: dict[str, Any], now: datetime) -> Optional[Write]:
        """The write for ``event`` (a full Event, count 1) at ``now``; None to drop it."""
        event, key = self._combine(event, _seconds(now))
        event, patch = self._count(event, key, _stamp(now))
        if not self._take_token(event, _seconds(now)):
            return None
        return Write(event, patch)

    def _combine(self, event: dict[str, Any], now: float) -> tuple[dict[str, Any], Any]:
        key = similar_key(event)
        record = self._similar.get(key)
        if record is None or now - record.last > self.limits.similar_window_seconds:
            record = _Similar(set(), now)
        record.messages.add(event.get("message", ""))
        record.last = now
        self._similar.put(key, record)
        if len(record.messages) < self.limits.max_similar:
            return event, identity_key(event)
        record.messages.pop()  # keep the set bounded; later messages keep combining
        return {**event, "message": COMBINED_PREFIX + event.get("message", "")}, ("combined", key)

    def _count(self, event: dict[str, Any], key: Any, now: str) -> tuple[dict[str, Any], Optional[dict[str, Any]]]:
        seen = self._seen.get(key)
        if seen is None:
            name = self._new_name((event.get("involvedObject") or {}).get("name", "event"))
            event = {**event, "metadata": {**event["metadata"], "name": name}, "count": 1}
            self._seen.put(key, _Seen(1, event.get("firstTimestamp") or now, name))
            return event, None
        seen.count += 1
        event = {
            **event,
            "metadata": {**event["metadata"], "name": seen.name},
            "count": seen.count,
            "firstTimestamp": seen.first_timestamp,
            "lastTimestamp": now,
        }
        self._seen.put(key, seen)
        return event, {"count": seen.count, "lastTimestamp": now, "message": event.get("message", "")}

    def _take_token(self, event: dict[str, Any], now: float) -> bool:
        key = (*_source_and_object(event), event.get("type", ""), event.get("reason", ""))
        limits = self.limits
        bucket = self._buckets.get(key) or _Bucket(float(limits.burst), now)
        bucket.tokens = min(float(limits.burst), bucket.tokens + max(0.0, now - bucket.last) / limits.refill_seconds)
        bucket.last = now
        self._buckets.put(key, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True


def event_object(job: dict[str, Any], event: EventLike, component: str, now: datetime, *,
                 host: str = "", field_path: str = "") -> dict[str, Any]:
    """The core/v1 Event about ``job`` (any object); ``host`` is the reporting node (a
    kubelet's), ``field_path`` the part of the object it is about (``spec.containers{x}``)."""
    meta = job["metadata"]
    stamp = _stamp(now)
    written: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # client-go names events <object>.<unique suffix>; the suffix only has to be unique.
            "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
            "namespace": meta.get("namespace") or "default",
        },
        "involvedObject": {
            "apiVersion": job.get("apiVersion"),
            "kind": job.get("kind"),
            "namespace": meta.get("namespace"),
            "name": meta["name"],
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": event.type,
        "reason": event.reason,
        "message": event.message,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    if field_path:
        written["involvedObject"]["fieldPath"] = field_path
    if host:  # client-go's recorder: the source's host is the reporting instance
        written["source"]["host"] = host
        written["reportingInstance"] = host
    return written


class EventRecorder:
    """Records Events through an :class:`EventCorrelator`; counts what it writes and drops."""

    def __init__(self, client: KubeClient, limits: CorrelatorLimits = CorrelatorLimits()) -> None:
        self.client = client
        self.correlator = EventCorrelator(limits)
        self._lock = threading.Lock()
        self.writes = 0  # Event creates and PATCHes sent
        self.created = 0  # of which creates of a new Event
        self.dropped = 0  # events the spam filter kept from the API server

    def record(self, job: dict[str, Any], event: EventLike, component: str, now: datetime, *,
               host: str = "", field_path: str = "") -> None:
        with self._lock:
            write = self.correlator.correlate(event_object(job, event, component, now, host=host, field_path=field_path), now)
            if write is None:
                self.dropped += 1
                return
            self.writes += 1
            self.created += write.patch is None
        meta = write.event["metadata"]
        try:
            if write.patch is None:
                self.client.create(EVENTS, write.event)
                return
            try:
                self.client.patch(EVENTS, meta["namespace"], meta["name"], write.patch)
            except ApiError as exc:
                if exc.code != 404:
                    raise
                self.client.create(EVENTS, write.event)  # expired or deleted: write it anew
        except ApiError as exc:
            log.warning(
                "could not record event",
                extra={"job": f"{job['metadata'].get('namespace')}/{job['metadata']['name']}", "reason": event.reason, "error": str(exc)},
            )
