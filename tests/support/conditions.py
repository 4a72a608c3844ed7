"""Job status conditions: finding one that holds, and writing one as the controller would."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

Obj = dict[str, Any]


def now() -> str:
    """The current time as Kubernetes writes it in a status (RFC 3339, seconds)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(job: Optional[Obj], type_: str) -> Optional[Obj]:
    """The job's condition of ``type_`` if its status is True, else None."""
    for cond in ((job or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_ and cond.get("status") == "True":
            return cond
    return None


def true_condition(type_: str, message: str, kind: str = "PyTorchJob") -> Obj:
    """A True condition as the training operator writes it (reason ``<Kind><Type>``)."""
    return {
        "type": type_,
        "status": "True",
        "reason": f"{kind}{type_}",
        "message": message,
        "lastUpdateTime": now(),
        "lastTransitionTime": now(),
    }
