"""Quantities, times and durations as the controllers read and write them."""

from __future__ import annotations

from datetime import datetime, timezone

from trainctl.cluster.controlplane import units


def test_milli_values_round_up_like_milli_value() -> None:
    assert units.milli_value("250000000n") == 250  # metrics-server reports CPU in nanocores
    assert units.milli_value("250000001n") == 251
    assert units.milli_value("1.5") == 1500
    assert units.milli_value("12Ki") == 12 * 1024 * 1000
    assert units.milli_value("bad") is None and units.milli_value(None) is None


def test_canonical_decimal_si() -> None:
    assert [units.format_milli(v) for v in (500, 1000, 1500_000, 2_000_000_000, 0)] == ["500m", "1", "1500", "2M", "0"]


def test_times() -> None:
    assert units.parse_time("2026-01-01T12:00:00.123456Z") == datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    assert units.parse_time("") is None and units.parse_time("yesterday") is None
    assert units.format_time(datetime(2026, 1, 1, 12, 0, 0, 999999, tzinfo=timezone.utc)) == "2026-01-01T12:00:00Z"
