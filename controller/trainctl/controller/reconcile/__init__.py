"""The reconcile core: ``reconcile(job, observed, now, config) -> Plan``, pure and deterministic.

Everything the controller decides about a training job happens here, with no I/O and no
clock; ``trainctl/kube`` applies the Plan. See docs/architecture.md for the contract.
"""

from trainctl.controller.reconcile.config import ReconcileConfig
from trainctl.controller.reconcile.core import reconcile
from trainctl.controller.reconcile.plan import Event, ObjectRef, Observed, Plan

__all__ = ["Event", "ObjectRef", "Observed", "Plan", "ReconcileConfig", "reconcile"]
