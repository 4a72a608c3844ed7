"""One plugin per job kind: PyTorchJob and MSJob.

The reconcile core asks ``framework_for(kind)`` and drives the returned ``Framework``; see
``base.Framework`` for what a kind decides.
"""

from __future__ import annotations

from trainctl.api import constants as c
from trainctl.controller.frameworks.base import Framework
from trainctl.controller.frameworks.mindspore import MindSporeFramework
from trainctl.controller.frameworks.pytorch import PyTorchFramework

FRAMEWORKS: dict[str, Framework] = {
    c.PYTORCHJOB_KIND: PyTorchFramework(),
    c.MSJOB_KIND: MindSporeFramework(),
}


def framework_for(kind: str) -> Framework:
    try:
        return FRAMEWORKS[kind]
    except KeyError:
        raise ValueError(f"not a training job kind: {kind!r}") from None


__all__ = ["FRAMEWORKS", "Framework", "framework_for"]
