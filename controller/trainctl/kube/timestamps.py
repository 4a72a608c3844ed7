"""The clock as Kubernetes writes it: metav1.Time, RFC 3339 to the second, in UTC."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone


def now_rfc3339(offset_seconds: float = 0) -> str:
    """Now (plus ``offset_seconds``), at second precision, as Kubernetes writes metav1.Time."""
    moment = datetime.now(timezone.utc) + timedelta(seconds=offset_seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
