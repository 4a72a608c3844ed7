"""The registry of job kinds: every kind trainctl serves, found by name or by object.

A kind is its module (``trainctl.api.pytorch``: model, defaulting, rules, descriptor) and
one ``register`` line here; everything that serves kinds (defaulting, validation, loading,
CRDs, the kube resource table, the controller, the launcher, the pipelines, the timeline)
reads this registry when it needs it. Code outside trainctl adds a kind the same way, with
``register`` (or, for a test, ``registered``), and its framework plugin with
``trainctl.controller.frameworks.register``.
"""

from __future__ import annotations

from typing import Any, Optional

from trainctl.api.jobkind import JobKind
from trainctl.api.mindspore import MSJOB
from trainctl.api.pytorch import PYTORCHJOB
from trainctl.api.registry import Registry

# Every kind by name, in the order lists and help texts show them; ``KINDS`` is a live view.
BY_KIND: Registry[JobKind] = Registry("job kind", key=lambda kind: kind.kind)
KINDS = BY_KIND.values()
register = BY_KIND.register
unregister = BY_KIND.unregister
registered = BY_KIND.registered

register(PYTORCHJOB)
register(MSJOB)


def find(kind: Any) -> Optional[JobKind]:
    """The descriptor of a kind name, or None for anything else."""
    return BY_KIND.get(kind) if isinstance(kind, str) else None


def of(obj: Any) -> Optional[JobKind]:
    """The kind an object is, when both its kind and its apiVersion match one."""
    if not isinstance(obj, dict):
        return None
    found = find(obj.get("kind"))
    return found if found is not None and obj.get("apiVersion") == found.api_version else None


__all__ = ["BY_KIND", "KINDS", "MSJOB", "PYTORCHJOB", "JobKind", "find", "of", "register", "registered", "unregister"]
