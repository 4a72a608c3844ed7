"""``events.k8s.io/v1`` Events as a view of ``core/v1`` Events: one store, two versions.

kube-apiserver keeps both in one place (events.k8s.io shares the core Events' storage) and
converts at the API's edge, so an Event a kubelet records through ``v1`` is listed, watched,
patched or deleted through ``events.k8s.io/v1`` under the same name and resourceVersion,
and the other way round. The stored form here is ``core/v1``; these functions convert
plain dicts both ways, as kube's conversion does: some fields carry over under their own
name (``reason``, ``type``, ``action``, ``related``, ``series``, ``eventTime``,
``reportingInstance``, ``metadata``), the others are renamed:

=========================  ============================
events.k8s.io/v1           core/v1
=========================  ============================
note                       message
regarding                  involvedObject
reportingController        reportingComponent
deprecatedSource           source
deprecatedFirstTimestamp   firstTimestamp
deprecatedLastTimestamp    lastTimestamp
deprecatedCount            count
=========================  ============================

Field selectors follow: an ``events.k8s.io/v1`` request names the fields its own way
(``regarding.name``, ``reportingController``) and they select on the stored ones.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

CORE_VERSION = "v1"
EVENTS_VERSION = "events.k8s.io/v1"

_RENAMED = {
    "note": "message",
    "regarding": "involvedObject",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_TO_EVENTS = {core: events for events, core in _RENAMED.items()}

# events.k8s.io/v1 field selector labels -> the core/v1 labels they select on (kube's list).
FIELD_LABELS = {
    "metadata.name": "metadata.name",
    "metadata.namespace": "metadata.namespace",
    "reason": "reason",
    "type": "type",
    "source": "source",
    "reportingController": "reportingComponent",
    **{f"regarding.{field}": f"involvedObject.{field}"
       for field in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
}


def _renamed(obj: Obj, names: dict[str, str], api_version: str) -> Obj:
    out: Obj = {"apiVersion": api_version, "kind": "Event"}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind"):
            out[names.get(key, key)] = value
    return out


def to_core(event: Obj) -> Obj:
    """An ``events.k8s.io/v1`` Event as ``core/v1`` (the stored form)."""
    return _renamed(event, _RENAMED, CORE_VERSION)


def to_events(event: Obj) -> Obj:
    """A ``core/v1`` Event as ``events.k8s.io/v1``; one already in that version as it is."""
    if event.get("apiVersion") == EVENTS_VERSION:
        return event
    return _renamed(event, _TO_EVENTS, EVENTS_VERSION)
