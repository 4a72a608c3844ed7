"""kube-apiserver's ``DefaultTolerationSeconds`` admission plugin.

Every pod created gets tolerations of the ``node.kubernetes.io/not-ready`` and
``node.kubernetes.io/unreachable`` NoExecute taints for 300 s, unless it already tolerates
them, so the node lifecycle controller evicts pods of a failed node after five minutes
rather than at once. As in the plugin, a toleration counts when its key is that taint's
key or empty (every key) and its effect is NoExecute or empty (every effect); its operator
and value are not looked at.
"""

from __future__ import annotations

from typing import Any

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300


def _tolerates(tolerations: list[Any], key: str) -> bool:
    return any(isinstance(t, dict) and t.get("key", "") in (key, "") and t.get("effect", "") in ("NoExecute", "")
               for t in tolerations)


def add_defaults(pod: dict[str, Any], *, seconds: int = DEFAULT_TOLERATION_SECONDS) -> None:
    """Append the default not-ready and unreachable tolerations a new ``pod`` lacks."""
    spec = pod.setdefault("spec", {})
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        if tolerations is not None:
            return  # not a list: validation reports it as it is
        tolerations = []
    missing = [key for key in (NOT_READY, UNREACHABLE) if not _tolerates(tolerations, key)]
    if missing:
        spec["tolerations"] = [*tolerations, *({"key": key, "operator": "Exists", "effect": "NoExecute",
                                                "tolerationSeconds": seconds} for key in missing)]
