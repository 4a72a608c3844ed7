"""Structured logs: one line per decision, fields as ``key=value`` or one JSON object.

Callers pass their fields with ``extra={...}`` (``job="ns/name"`` and so on); the formatters
print whatever fields a record carries beyond the standard ones, so no call site formats a
message by hand and clusters can ingest ``--log-format json`` as is.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {"ts": _time(record), "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        line.update(_fields(record))
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        parts = [_time(record), record.levelname, record.getMessage()]
        parts += [f"{k}={v}" for k, v in _fields(record).items()]
        text = " ".join(parts)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure(fmt: str = "text", level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger("trainctl")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
