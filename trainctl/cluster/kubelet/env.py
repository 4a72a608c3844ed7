"""A container's environment and command line, computed the way the real kubelet does.

``env`` entries (plain values and every ``valueFrom`` source), ``envFrom``, and the
``$(VAR)`` expansion rules of Kubernetes (``$$`` escapes, unknown references stay as
written). Lookups of ConfigMaps and Secrets are passed in, so this module is pure.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Optional

from trainctl.cluster.podutil import quantity_or_zero

Obj = dict[str, Any]
Lookup = Callable[[str, str], Optional[Obj]]  # (namespace, name) -> object or None

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_FIELD_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")


class ConfigError(Exception):
    """The container cannot start: the real kubelet's CreateContainerConfigError."""


def expand(text: str, variables: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: known names are replaced, ``$$`` yields ``$``."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char != "$" or i + 1 >= n:
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "$":
            out.append("$")
            i += 2
        elif following == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append(text[i:])
                break
            name = text[i + 2:close]
            out.append(variables[name] if name in variables else text[i:close + 1])
            i = close + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def field_value(pod: Obj, path: str) -> str:
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
        "status.podIPs": ",".join(ip.get("ip", "") for ip in status.get("podIPs") or []),
        "status.hostIPs": ",".join(ip.get("ip", "") for ip in status.get("hostIPs") or []),
    }
    if path in simple:
        return simple[path] or ""
    match = _FIELD_SUBSCRIPT.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise ConfigError(f"unsupported fieldRef fieldPath {path!r}")


def resource_value(pod: Obj, container: Obj, ref: Obj, allocatable: dict[str, Any]) -> str:
    target = container
    if ref.get("containerName"):
        named = next((c for c in pod.get("spec", {}).get("containers", []) if c.get("name") == ref["containerName"]), None)
        if named is None:
            raise ConfigError(f"resourceFieldRef names unknown container {ref['containerName']!r}")
        target = named
    kind, _, resource = ref.get("resource", "").partition(".")
    if kind not in ("limits", "requests") or not resource:
        raise ConfigError(f"unsupported resourceFieldRef resource {ref.get('resource')!r}")
    declared = ((target.get("resources") or {}).get(kind) or {}).get(resource)
    if declared is None and kind == "requests":
        declared = ((target.get("resources") or {}).get("limits") or {}).get(resource)
    # Like the kubelet: an unset limit reports the node's allocatable; an unset request, zero.
    amount = quantity_or_zero(declared) if declared is not None else (quantity_or_zero(allocatable.get(resource, 0)) if kind == "limits" else Decimal(0))
    divisor = quantity_or_zero(ref.get("divisor") or "1") or Decimal(1)
    return str(int(math.ceil(amount / divisor)))


def _key_from(obj: Optional[Obj], kind: str, name: str, key: str, optional: bool, secret: bool) -> Optional[str]:
    if obj is None:
        if optional:
            return None
        raise ConfigError(f'{kind} "{name}" not found')
    if secret:
        data = obj.get("data") or {}
        if key in data:
            return base64.b64decode(data[key]).decode("utf-8", "replace")
        value = (obj.get("stringData") or {}).get(key)
    else:
        value = (obj.get("data") or {}).get(key)
        if value is None and key in (obj.get("binaryData") or {}):
            value = base64.b64decode(obj["binaryData"][key]).decode("utf-8", "replace")
    if value is None and not optional:
        raise ConfigError(f"couldn't find key {key} in {kind} {obj.get('metadata', {}).get('namespace')}/{name}")
    return value


def downward_api_names(container: Obj) -> set[str]:
    """Variables whose final value comes from the downward API (fieldRef, resourceFieldRef).

    They describe the pod itself (its name, namespace, IP, resources), so they are never
    Service names to rewrite, even when a pod's name equals a Service's (MindSpore's
    ``MS_NODE_ID`` is the pod name, and PyTorch pods share names with their Services).
    """
    names: set[str] = set()
    for entry in container.get("env") or []:
        source = entry.get("valueFrom") if "value" not in entry else None
        if source and ("fieldRef" in source or "resourceFieldRef" in source):
            names.add(entry.get("name", ""))
        else:
            names.discard(entry.get("name", ""))
    return names


def container_env(pod: Obj, container: Obj, configmaps: Lookup, secrets: Lookup,
                  allocatable: dict[str, Any]) -> dict[str, str]:
    """The variables a container declares, in Kubernetes order (envFrom first, then env)."""
    namespace = pod.get("metadata", {}).get("namespace", "default")
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        if "configMapRef" in source:
            ref, kind, lookup, secret = source["configMapRef"], "configmap", configmaps, False
        elif "secretRef" in source:
            ref, kind, lookup, secret = source["secretRef"], "secret", secrets, True
        else:
            continue
        obj = lookup(namespace, ref.get("name", ""))
        if obj is None:
            if ref.get("optional"):
                continue
            raise ConfigError(f'{kind} "{ref.get("name", "")}" not found')
        data = dict(obj.get("data") or {})
        for key, text in data.items():
            name = prefix + key
            if _ENV_NAME.match(name):  # the kubelet skips invalid names
                env[name] = base64.b64decode(text).decode("utf-8", "replace") if secret else text

    for entry in container.get("env") or []:
        name = entry.get("name", "")
        if "value" in entry or "valueFrom" not in entry:
            env[name] = expand(str(entry.get("value") or ""), env)
            continue
        source = entry["valueFrom"] or {}
        value: Optional[str]
        if "fieldRef" in source:
            value = field_value(pod, source["fieldRef"].get("fieldPath", ""))
        elif "resourceFieldRef" in source:
            value = resource_value(pod, container, source["resourceFieldRef"], allocatable)
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            value = _key_from(configmaps(namespace, ref.get("name", "")), "configmap", ref.get("name", ""),
                              ref.get("key", ""), bool(ref.get("optional")), secret=False)
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            value = _key_from(secrets(namespace, ref.get("name", "")), "secret", ref.get("name", ""),
                              ref.get("key", ""), bool(ref.get("optional")), secret=True)
        else:
            raise ConfigError(f"env {name}: unsupported valueFrom")
        if value is not None:
            env[name] = value
    return env


def command_line(container: Obj, env: dict[str, str]) -> list[str]:
    """``command`` + ``args`` with ``$(VAR)`` expanded.

    Images are not run here, so there is no image entrypoint: without ``command`` the
    ``args`` are the whole command line, and a container with neither cannot start.
    """
    parts = []
    for field in ("command", "args"):
        value = container.get(field) or []
        if not isinstance(value, list) or any(isinstance(part, (dict, list)) for part in value):
            raise ConfigError(f"container {container.get('name')!r}: {field} must be a list of strings, not {value!r}")
        parts += value
    argv = [expand(str(part), env) for part in parts]
    if not argv:
        raise ConfigError(f"container {container.get('name')!r} has no command or args: images are not run "
                          "by the local kubelet, so the pod spec must say what to run")
    return argv
