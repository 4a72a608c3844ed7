"""A controller loop that runs one pass every period, or sooner when asked.

Both control-plane controllers are level-based: each pass reads the informer caches and
acts on the whole state, so a pass that fails is simply followed by the next one.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timezone
from typing import Callable, Optional

from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane")


def utc_now() -> datetime:
    """The controllers' default clock (tests pass their own)."""
    return datetime.now(timezone.utc)


class PeriodicLoop:
    """Start the informers, wait for their caches, then call ``sync`` every ``period``.

    ``sync`` returns how soon it wants the next pass (None: after the period).
    """

    def __init__(self, name: str, informers: list[Informer], sync: Callable[[], Optional[float]], period: float) -> None:
        self.name = name
        self.informers = informers
        self.sync = sync
        self.period = period
        self.passes = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        for informer in self.informers:
            informer.start()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wake_on_changes(self) -> PeriodicLoop:
        """Run a pass whenever any of the informers sees a change (level-based: the pass reads everything)."""
        for informer in self.informers:
            informer.add_handler(lambda event_type, new, old: self.wake())
        return self

    def wake(self) -> None:
        """Run a pass now (e.g. a new object appeared)."""
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        for informer in self.informers:
            informer.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    def _run(self) -> None:
        while not self.synced():
            if self._stop.wait(0.05):
                return
        while not self._stop.is_set():
            self._wake.clear()
            sooner: Optional[float] = None
            try:
                sooner = self.sync()
            except Exception:  # one bad pass must not end the controller
                log.exception("controller pass failed", extra={"controller": self.name})
            self.passes += 1
            delay = self.period if sooner is None else max(0.0, min(self.period, sooner))
            self._wake.wait(delay)


class LoopController:
    """A control-plane controller that is one :class:`PeriodicLoop`."""

    loop: PeriodicLoop

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()
