"""One plugin per job kind: PyTorchJob and MSJob.

The reconcile core asks ``framework_for(kind)`` and drives the returned ``Framework``; see
``base.Framework`` for what a kind decides. A new kind is its module in ``trainctl.api``
(registered with ``trainctl.api.kinds.register``), its plugin module here, and one
``register`` line below (or, from outside trainctl, a call to ``register``).
"""

from __future__ import annotations

from typing import Any

from trainctl.api import kinds
from trainctl.api.registry import Registry
from trainctl.controller.frameworks.base import Framework
from trainctl.controller.frameworks.mindspore import MindSporeFramework
from trainctl.controller.frameworks.pytorch import PyTorchFramework


def _kind_registered(framework: Framework[Any]) -> None:
    if kinds.find(framework.kind) is not framework.job_kind:
        raise ValueError(f"register the job kind {framework.kind!r} (trainctl.api.kinds.register) before its plugin")


# The plugin registry, by kind name; every kind of ``trainctl.api.kinds.KINDS`` has one. Each
# plugin is typed by its own job model; callers hold the job as the common ``Job``.
FRAMEWORKS: Registry[Framework[Any]] = Registry("framework plugin", key=lambda fw: fw.kind, check=_kind_registered)
register = FRAMEWORKS.register
unregister = FRAMEWORKS.unregister
registered = FRAMEWORKS.registered

register(PyTorchFramework())
register(MindSporeFramework())
assert set(FRAMEWORKS) == set(kinds.BY_KIND), "every job kind needs its framework plugin"


def framework_for(kind: str) -> Framework[Any]:
    try:
        return FRAMEWORKS[kind]
    except KeyError:
        raise ValueError(f"not a training job kind: {kind!r}") from None


__all__ = ["FRAMEWORKS", "Framework", "framework_for", "register", "registered", "unregister"]
