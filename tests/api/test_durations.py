"""The one duration parser every flag and annotation uses."""

from __future__ import annotations

import argparse
from typing import Optional

import pytest

from trainctl.api.durations import parse_duration, positive_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("10s", 10.0), ("2m", 120.0), ("1m30s", 90.0), ("500ms", 0.5), ("7", 7.0), ("1h", 3600.0), ("1.5h", 5400.0),
    (".5s", 0.5), ("250us", 0.00025), (" 30s ", 30.0), ("-5", 0.0),
    ("ten", None), ("10x", None), ("", None), ("10 s", None), ("s", None), ("inf", None), ("nan", None),
])
def test_parse_duration(text: str, seconds: Optional[float]) -> None:
    assert parse_duration(text) == pytest.approx(seconds) if seconds else parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "message"), [("soon", "use seconds or units like 90s"), ("0s", "must be positive")])
def test_positive_duration_is_a_usage_error_that_says_what_is_wanted(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        positive_duration(text)
