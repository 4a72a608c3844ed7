"""Label selectors as the scheduler reads them: the matching rules every component shares
(``trainctl.cluster.label_selectors``), and what only the scheduler adds: ``matchLabelKeys`` and
``mismatchLabelKeys`` (pod affinity terms, topology spread constraints) become requirements on
the incoming pod's own label values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from trainctl.cluster.label_selectors import requirement_matches, selector_matches

__all__ = ["requirement_matches", "selector_matches", "with_label_keys"]

Obj = dict[str, Any]


def with_label_keys(selector: Optional[Obj], pod_labels: Mapping[str, str], match_keys: Any = (),
                    mismatch_keys: Any = ()) -> Optional[Obj]:
    """``selector`` narrowed by the incoming pod's values of ``matchLabelKeys`` (``In``) and
    ``mismatchLabelKeys`` (``NotIn``); keys the pod does not carry are ignored."""
    extra = [{"key": key, "operator": operator, "values": [pod_labels[key]]}
             for keys, operator in ((match_keys or (), "In"), (mismatch_keys or (), "NotIn"))
             for key in keys if key in pod_labels]
    if not extra or selector is None:
        return selector
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or []), *extra]}
