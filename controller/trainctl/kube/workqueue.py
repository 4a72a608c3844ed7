"""The work queue between the informers and the reconcile workers (client-go's semantics).

- A key is queued at most once, however many events arrive for it (dirty set).
- A key being processed is never handed to a second worker; if it is added meanwhile it is
  queued again when the first worker calls :meth:`done`.
- :meth:`add_rate_limited` re-queues after a per-key exponential back-off, reset by
  :meth:`forget` once the key reconciles cleanly.
- :meth:`add_after` really fires: deadlines and TTLs are kept in a heap and released by the
  same condition variable the workers wait on, so no timer thread is needed.
- :meth:`shut_down` stops handing out keys; workers finish what they hold.
- ``on_depth`` hears the queue's length after each change, ``on_wait`` how long each key
  waited in the queue before a worker took it (client-go's ``workqueue_queue_duration_seconds``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from typing import Callable, Generic, Hashable, Optional, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        base_delay: float = 0.005,
        max_delay: float = 300.0,
        on_depth: Optional[Callable[[int], None]] = None,
        on_wait: Optional[Callable[[float], None]] = None,
    ) -> None:
        self._queue: deque[K] = deque()
        self._queued_at: dict[K, float] = {}  # when each queued key joined the queue
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiting: list[tuple[float, int, K]] = []
        self._waiting_at: dict[K, float] = {}
        self._seq = itertools.count()
        self._failures: dict[K, int] = {}
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._on_depth = on_depth
        self._on_wait = on_wait
        self._shutting_down = False
        self._cond = threading.Condition()

    # --- producers --------------------------------------------------------------------------
    def add(self, key: K) -> None:
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._enqueue_locked(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` in ``delay`` seconds; an earlier pending deadline for it wins."""
        if delay <= 0:
            self.add(key)
            return
        when = time.monotonic() + delay
        with self._cond:
            if self._shutting_down:
                return
            if self._waiting_at.get(key, float("inf")) <= when:
                return
            self._waiting_at[key] = when
            heapq.heappush(self._waiting, (when, next(self._seq), key))
            self._cond.notify()

    def add_rate_limited(self, key: K) -> float:
        """Re-queue after this key's back-off (base × 2^failures, capped). Returns the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay: float = min(self._max_delay, self._base_delay * (2**failures))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    # --- consumers --------------------------------------------------------------------------
    def get(self, timeout: Optional[float] = None) -> Optional[K]:
        """The next key, or None once shut down (or after ``timeout``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._shutting_down:
                    return None
                self._release_due_locked()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    self._report_depth()
                    queued_at = self._queued_at.pop(key, None)
                    if self._on_wait is not None and queued_at is not None:
                        self._on_wait(time.monotonic() - queued_at)
                    return key
                now = time.monotonic()
                wait = None
                if self._waiting:
                    wait = max(0.0, self._waiting[0][0] - now)
                if deadline is not None:
                    left = deadline - now
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._enqueue_locked(key)

    def _enqueue_locked(self, key: K) -> None:
        self._queue.append(key)
        self._queued_at[key] = time.monotonic()
        self._report_depth()
        self._cond.notify()

    def _release_due_locked(self) -> None:
        now = time.monotonic()
        while self._waiting and self._waiting[0][0] <= now:
            when, _, key = heapq.heappop(self._waiting)
            if self._waiting_at.get(key) != when:
                continue  # superseded by an earlier deadline that already fired
            del self._waiting_at[key]
            self._add_locked(key)

    def _report_depth(self) -> None:
        if self._on_depth is not None:
            self._on_depth(len(self._queue))

    # --- lifecycle --------------------------------------------------------------------------
    def shut_down(self) -> None:
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)
