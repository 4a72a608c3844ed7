"""A client-side QPS/burst limit (a token bucket), like client-go's ``--kube-api-qps``.

A controller that falls behind must not stampede the API server when it catches up; the
server's own priority-and-fairness is the second line of defence, not the first.
"""

from __future__ import annotations

import threading
import time


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up. ``qps <= 0`` means no limit."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token, sleeping until one is available. Returns the time waited."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            # A negative balance is a reservation: this caller waits for its own token.
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            time.sleep(wait)
        return wait
