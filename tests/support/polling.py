"""Waiting for an outcome in tests: poll a check with a generous deadline, never a sleep that
hopes the machine was fast enough (tests run on loaded 2-core machines beside other clusters)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def poll(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    """``check()``'s first truthy result, polled every ``interval`` seconds until ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout:g}s")
        time.sleep(interval)
