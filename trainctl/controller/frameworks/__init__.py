"""One plugin per job kind: PyTorchJob and MSJob.

The reconcile core asks ``framework_for(kind)`` and drives the returned ``Framework``; see
``base.Framework`` for what a kind decides. A new kind is its descriptor in
``trainctl.api.kinds``, its plugin module here, and one entry in ``FRAMEWORKS``.
"""

from __future__ import annotations

from typing import Any

from trainctl.api import kinds
from trainctl.controller.frameworks.base import Framework
from trainctl.controller.frameworks.mindspore import MindSporeFramework
from trainctl.controller.frameworks.pytorch import PyTorchFramework

# The plugin registry, by kind name; every kind of ``trainctl.api.kinds.KINDS`` has one. Each
# plugin is typed by its own job model; callers hold the job as the common ``Job``.
FRAMEWORKS: dict[str, Framework[Any]] = {fw.kind: fw for fw in (PyTorchFramework(), MindSporeFramework())}
assert set(FRAMEWORKS) == set(kinds.BY_KIND), "every job kind needs its framework plugin"


def framework_for(kind: str) -> Framework[Any]:
    try:
        return FRAMEWORKS[kind]
    except KeyError:
        raise ValueError(f"not a training job kind: {kind!r}") from None


__all__ = ["FRAMEWORKS", "Framework", "framework_for"]
