"""Kubernetes value formats the controllers read and write: times and quantities.

Quantities are handled in milli-units as integers, as the HPA controller does
(``Quantity.MilliValue``), so that averages and ratios match kube-controller-manager's.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from trainctl.api import quantity

_SI_SUFFIXES = ("k", "M", "G", "T", "P", "E")


def parse_time(value: Any) -> Optional[datetime]:
    """metav1.Time (``2024-01-02T03:04:05Z``) or MicroTime (with microseconds); None if absent."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc)
    except ValueError:
        return None


def format_time(when: datetime) -> str:
    """metav1.Time: RFC 3339 at whole seconds."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def milli_value(value: Any) -> Optional[int]:
    """A quantity in milli-units, rounded up as ``MilliValue`` does; None when malformed."""
    try:
        return quantity.milli_value(value)
    except ValueError:
        return None


def format_milli(milli: int) -> str:
    """A milli-unit count as a canonical DecimalSI quantity (``500m``, ``2``, ``3M``)."""
    if milli % 1000:
        return f"{milli}m"
    units = milli // 1000
    suffix = ""
    for candidate in _SI_SUFFIXES:
        if units == 0 or units % 1000:
            break
        units //= 1000
        suffix = candidate
    return f"{units}{suffix}"
