"""Waiting on a condition variable that watch threads notify, never on sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Optional, TypeVar

T = TypeVar("T")


def wait_on(changed: threading.Condition, check: Callable[[], Optional[T]], timeout: float, *,
            recheck: Optional[float] = None) -> Optional[T]:
    """The first truthy ``check()``, asked again each time ``changed`` is notified (and every
    ``recheck`` seconds, for checks on state nobody notifies about); None after ``timeout``."""
    deadline = time.monotonic() + timeout
    with changed:
        while True:
            result = check()
            if result:
                return result
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            changed.wait(left if recheck is None else min(left, recheck))
