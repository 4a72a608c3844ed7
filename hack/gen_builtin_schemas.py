#!/usr/bin/env python3
"""Write the built-in kinds' schemas the embedded API server serves and validates against.

The source is the Kubernetes JSON schemas shipped by the ``kubernetes-validate`` package (a
test dependency): its ``_definitions.json`` for the Kubernetes version the server reports,
trimmed to the definitions the served built-in kinds reach. The server reads only the
generated file, so the ~100 MB package is not a runtime dependency.

    python hack/gen_builtin_schemas.py           # regenerate
    python hack/gen_builtin_schemas.py --check   # CI: exit 1 if the file is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "trainctl" / "cluster" / "apiserver" / "admission" / "builtin_schemas.json"
KUBERNETES_VERSION = "1.32.0"  # the version the embedded API server reports
# The kinds the server serves (registry.builtin_types), plus autoscaling/v1 Scale for the
# scale subresource and policy/v1 Eviction for the eviction subresource.
ROOTS = (
    "io.k8s.api.core.v1.Namespace", "io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.Service",
    "io.k8s.api.core.v1.Endpoints", "io.k8s.api.core.v1.Event", "io.k8s.api.core.v1.ConfigMap",
    "io.k8s.api.core.v1.Secret", "io.k8s.api.core.v1.ServiceAccount", "io.k8s.api.core.v1.Node",
    "io.k8s.api.events.v1.Event", "io.k8s.api.coordination.v1.Lease", "io.k8s.api.discovery.v1.EndpointSlice",
    "io.k8s.api.batch.v1.Job", "io.k8s.api.batch.v1.CronJob",
    "io.k8s.api.apps.v1.Deployment", "io.k8s.api.apps.v1.ReplicaSet", "io.k8s.api.apps.v1.DaemonSet",
    "io.k8s.api.apps.v1.StatefulSet", "io.k8s.api.apps.v1.ControllerRevision",
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler", "io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler",
    "io.k8s.api.policy.v1.PodDisruptionBudget",
    "io.k8s.api.policy.v1.Eviction", "io.k8s.api.scheduling.v1.PriorityClass",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    "io.k8s.api.autoscaling.v1.Scale",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    # Identity (registry.identity_types).
    "io.k8s.api.rbac.v1.Role", "io.k8s.api.rbac.v1.ClusterRole", "io.k8s.api.rbac.v1.RoleBinding",
    "io.k8s.api.rbac.v1.ClusterRoleBinding", "io.k8s.api.authentication.v1.TokenRequest",
)
REF_PREFIX = "#/definitions/"


def _source_definitions() -> tuple[dict[str, Any], str]:
    import importlib.metadata

    import kubernetes_validate

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{KUBERNETES_VERSION}-local"
    document = json.loads((base / "_definitions.json").read_text(encoding="utf-8"))
    return document["$defs"], importlib.metadata.version("kubernetes-validate")


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rsplit("/", 1)[-1]
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: REF_PREFIX + v.rsplit("/", 1)[-1] if k == "$ref" and isinstance(v, str) else _rewrite_refs(v)
                for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node


def render() -> str:
    definitions, package_version = _source_definitions()
    kept: dict[str, Any] = {}
    pending = list(ROOTS)
    while pending:
        name = pending.pop()
        if name in kept:
            continue
        kept[name] = _rewrite_refs(definitions[name])
        pending.extend(_refs(definitions[name]))
    document = {
        "source": f"kubernetes-validate {package_version}, Kubernetes v{KUBERNETES_VERSION}",
        "kubernetesVersion": KUBERNETES_VERSION,
        "definitions": dict(sorted(kept.items())),
    }
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None, output: Path = OUTPUT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if the file differs")
    args = parser.parse_args(argv)
    text = render()
    current = output.read_text(encoding="utf-8") if output.exists() else None
    shown = output.relative_to(ROOT) if output.is_relative_to(ROOT) else output
    if current == text:
        return 0
    if args.check:
        print(f"{shown} is out of date: run python hack/gen_builtin_schemas.py", file=sys.stderr)
        return 1
    output.write_text(text, encoding="utf-8")
    print(f"wrote {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
