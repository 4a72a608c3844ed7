"""Cron schedules as kube reads a CronJob's: five fields or a macro, and a time zone by name.

The API server refuses a schedule the CronJob controller could not run, and the controller
computes schedule times; both read schedules here. croniter parses them. kube's ``TZ=`` and
``CRON_TZ=`` prefixes are refused, as kube refuses them in favour of ``spec.timeZone``; so are
croniter's six- and seven-field forms, which kube's parser does not read, and ``@every``,
which croniter does not.
"""

from __future__ import annotations

from typing import Any, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter


def schedule_problem(schedule: Any, time_zone: Any) -> Optional[str]:
    """Why a schedule (and time zone) cannot be used, in kube's words; None when it can."""
    if not isinstance(schedule, str) or not schedule.strip():
        return "Required value"
    if schedule.strip().startswith(("TZ=", "CRON_TZ=")):
        return f'Invalid value: "{schedule}": cannot use TZ or CRON_TZ in schedule, use timeZone field instead'
    if not (schedule.startswith("@") or len(schedule.split()) == 5) or not croniter.is_valid(schedule):
        return f'Invalid value: "{schedule}": unparseable schedule'
    if time_zone is not None and zone(time_zone) is None:
        return f'Invalid value: "{time_zone}": unknown time zone {time_zone}'
    return None


def zone(name: Any) -> Optional[ZoneInfo]:
    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        return None
