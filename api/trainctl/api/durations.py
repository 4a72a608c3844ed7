"""Durations as Kubernetes writes them, one parser for every flag and annotation.

Go's ``time.ParseDuration`` syntax (``90s``, ``1m30s``, ``500ms``, ``1.5h``; units ns, us/µs,
ms, s, m, h), as kubectl's ``--timeout`` and kube-controller-manager's flags take it, plus a
bare number of seconds. Flags (``trainctl run --timeout``, ``local up --node-lost-grace``,
the control plane's periods) and annotations (``trainctl.io/node-lost-grace``) read the same
text the same way.
"""

from __future__ import annotations

import argparse
import re
from typing import Optional

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> Optional[float]:
    """Seconds (never negative) of a Go-style duration or a bare number; None if it is neither."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _PART.findall(text)
        if not parts or "".join(number + unit for number, unit in parts) != text:
            return None
        return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(0.0, seconds)


def positive_duration(text: str) -> float:
    """An argparse ``type``: a duration above zero, or a usage error that says what is wanted."""
    seconds = parse_duration(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use seconds or units like 90s, 10m, 1h30m")
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: must be positive")
    return seconds
