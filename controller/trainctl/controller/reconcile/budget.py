"""The PodDisruptionBudget of an elastic job: a drain never takes it below its minimum at once.

``kubectl drain`` (and any other client of the Eviction API) evicts pods only as far as their
budgets allow. An elastic PyTorchJob can train with ``elasticPolicy.minReplicas`` Workers, so
its budget is ``minAvailable: minReplicas`` over its Worker pods: a drain of several nodes
evicts Workers one budget at a time and waits (429) while the job is at its minimum; each
evicted Worker shrinks the job (``disrupted``) and its replacement, once Running elsewhere,
frees the budget for the next. The budget is named after the job, owned by it, and exists
while the job runs (not suspended, not finished); nothing is created on a cluster that does
not serve policy/v1 PodDisruptionBudgets.
"""

from __future__ import annotations

from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.controller.reconcile.children import typed_ref
from trainctl.controller.reconcile.state import Pass

PDB_API_VERSION = "policy/v1"
PDB_KIND = "PodDisruptionBudget"


def desired_budget(p: Pass) -> Optional[dict[str, Any]]:
    """The budget the job asks for, or None when its kind or spec asks for none."""
    minimum, rtype = p.framework.disruption_budget_minimum(p.job), p.framework.job_kind.scale_replica_type
    if minimum is None or rtype is None:
        return None
    selector = {**p.framework.base_labels(p.name), c.LABEL_REPLICA_TYPE: rtype.lower()}
    return {
        "apiVersion": PDB_API_VERSION,
        "kind": PDB_KIND,
        "metadata": p.job_ref.child_metadata(p.name),
        "spec": {"minAvailable": minimum, "selector": {"matchLabels": selector}},
    }


def reconcile(p: Pass, running: bool) -> None:
    """Create, update or delete the job's budget: it exists while the job runs."""
    if not p.observed.disruption_budgets:
        return
    desired = desired_budget(p) if running else None
    current = p.observed.pdb
    if current is None:
        if desired is not None:
            p.plan.creates.append(desired)
    elif desired is None:
        p.plan.deletes.append(typed_ref(current, PDB_KIND, PDB_API_VERSION))
    elif any((current.get("spec") or {}).get(key) != value for key, value in desired["spec"].items()):
        p.plan.updates.append({**current, "apiVersion": PDB_API_VERSION, "kind": PDB_KIND,
                               "spec": {**(current.get("spec") or {}), **desired["spec"]}})
