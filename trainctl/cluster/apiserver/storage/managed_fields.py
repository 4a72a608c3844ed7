"""Field ownership: ``metadata.managedFields`` as kube-apiserver keeps it, and server-side apply.

Every write records which manager set which fields: an Apply entry holds exactly the fields a
manager's last applied configuration named; an Update entry (create, update, non-apply patch)
gains the fields the write changed. A field that changes leaves every other manager's set. An
apply that would change a field another manager owns is a conflict (409) unless forced; an
applied value equal to the live one shares ownership; a field a manager applied before and no
longer applies is removed when nobody else owns it.

A field is a path of elements in kube's FieldsV1 spelling: ``f:name`` (a map key), ``k:{...}``
(an item of an associative list, by its keys) and ``v:...`` (an item of a set). Which lists are
associative and by which keys is the ``Shape`` of the kind: kube's list-map-keys for built-in
kinds, the CRD schema's ``x-kubernetes-list-type``/``x-kubernetes-list-map-keys`` for custom ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause

Obj = dict[str, Any]
Path = tuple[str, ...]
FieldSet = set[Path]

GRANULAR, ATOMIC, SET, MAP = "granular", "atomic", "set", "map"
# The names of the maps and lists leading to a value -> how that value merges and is owned.
Shape = Callable[[tuple[str, ...]], tuple[str, tuple[str, ...]]]

APPLY, UPDATE = "Apply", "Update"
KUBECTL = "kubectl"  # kubectl apply --server-side's manager, which takes over from its client-side apply
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# Built-in kinds' associative lists (the Go types' listMapKey tags), sets and atomic maps.
_LIST_MAP_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",), "initContainers": ("name",), "ephemeralContainers": ("name",),
    "env": ("name",), "volumes": ("name",), "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",), "conditions": ("type",), "imagePullSecrets": ("name",),
    "ownerReferences": ("uid",), "hostAliases": ("ip",), "resourceClaims": ("name",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"), "taints": ("key", "effect"),
    "podIPs": ("ip",), "hostIPs": ("ip",), "addresses": ("type",), "readinessGates": ("conditionType",),
}
_CONTAINER_LISTS = {"containers", "initContainers", "ephemeralContainers"}
_SET_LISTS = {"finalizers"}
_ATOMIC_MAPS = {"selector", "nodeSelector"}
_KEY_DEFAULTS = {"protocol": "TCP"}  # a key field the server defaults counts with its default
# Set by the server, never owned (kube's stripped metadata).
_SERVER_METADATA = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                    "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}


def builtin_shape(names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    name = names[-1] if names else ""
    if name == "ports":
        in_container = len(names) > 1 and names[-2] in _CONTAINER_LISTS
        return MAP, ("containerPort" if in_container else "port", "protocol")
    if name in _SET_LISTS:
        return SET, ()
    if name in _LIST_MAP_KEYS:
        return MAP, _LIST_MAP_KEYS[name]
    if name in _ATOMIC_MAPS and names[:1] != ("metadata",):
        return ATOMIC, ()
    return ATOMIC if name == "" else GRANULAR, ()


def schema_shape(schema: Obj | None) -> Shape:
    """A custom resource's shape: its OpenAPI schema below ``metadata`` (which is ObjectMeta)."""

    def shape(names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        if not names or names[0] == "metadata" or schema is None:
            return builtin_shape(names) if names else (GRANULAR, ())
        node: Any = schema
        for name in names:
            if isinstance(node, dict) and node.get("type") == "array":
                node = node.get("items")
            if not isinstance(node, dict):
                return ATOMIC, ()
            props = node.get("properties") or {}
            extra = node.get("additionalProperties")
            node = props.get(name) if name in props else (extra if isinstance(extra, dict) else None)
        if not isinstance(node, dict):
            return GRANULAR, ()
        list_type = node.get("x-kubernetes-list-type")
        if list_type == "map":
            return MAP, tuple(node.get("x-kubernetes-list-map-keys") or ())
        if list_type == "set":
            return SET, ()
        if node.get("type") == "array" or node.get("x-kubernetes-map-type") == "atomic":
            return ATOMIC, ()
        return GRANULAR, ()

    return shape


# --- field sets ---------------------------------------------------------------------------


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _identities(items: list[Any], keys: tuple[str, ...]) -> list[str] | None:
    """Each item's ``k:`` element, or None when the list cannot be associative (an item lacks a key)."""
    if not keys:
        return None
    out = []
    for item in items:
        if not isinstance(item, dict):
            return None
        key = {k: item.get(k, _KEY_DEFAULTS.get(k)) for k in keys}
        if any(v is None for v in key.values()):
            return None
        out.append("k:" + _json(key))
    return out


def tracked(obj: Obj) -> Obj:
    """The part of an object whose fields have owners."""
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    if meta:
        out["metadata"] = meta
    return out


def field_set(obj: Obj, shape: Shape) -> FieldSet:
    out: FieldSet = set()
    _collect(tracked(obj), (), (), shape, out)
    return out


def _collect(value: Any, path: Path, names: tuple[str, ...], shape: Shape, out: FieldSet) -> None:
    if isinstance(value, dict) and value and (not names or shape(names)[0] != ATOMIC):
        for key, child in value.items():
            _collect(child, (*path, "f:" + key), (*names, key), shape, out)
        return
    if isinstance(value, list) and value:
        kind, keys = shape(names)
        if kind == SET:
            out.update((*path, "v:" + _json(item)) for item in value)
            return
        ids = _identities(value, keys) if kind == MAP else None
        if ids is not None:
            for item, ident in zip(value, ids, strict=True):
                out.add((*path, ident))
                for key, child in item.items():
                    _collect(child, (*path, ident, "f:" + key), (*names, key), shape, out)
            return
    if path:
        out.add(path)


def fields_v1(obj: Obj, shape: Shape) -> Obj:
    """``encode(field_set(obj, shape))`` in one pass (what a create records)."""
    return _tree(tracked(obj), (), shape)


def _tree(value: Any, names: tuple[str, ...], shape: Shape) -> Obj:
    if isinstance(value, dict) and value and (not names or shape(names)[0] != ATOMIC):
        return {"f:" + key: _tree(child, (*names, key), shape) for key, child in value.items()}
    if isinstance(value, list) and value:
        kind, keys = shape(names)
        if kind == SET:
            return {"v:" + _json(item): {} for item in value}
        ids = _identities(value, keys) if kind == MAP else None
        if ids is not None:
            items = {}
            for item, ident in zip(value, ids, strict=True):
                children = {"f:" + key: _tree(child, (*names, key), shape) for key, child in item.items()}
                items[ident] = {".": {}, **children} if children else {}
            return items
    return {}


def changed_fields(old: Obj, new: Obj, shape: Shape) -> FieldSet:
    """The fields a write from ``old`` to ``new`` added, removed or changed."""
    gone, present = changes(old, new, shape)
    return gone | present


def changes(old: Obj, new: Obj, shape: Shape) -> tuple[FieldSet, FieldSet]:
    """The changed fields of a write: those of ``old`` (removed or changed) and those of ``new``
    (added or changed)."""
    gone: FieldSet = set()
    present: FieldSet = set()
    _diff(tracked(old), tracked(new), (), (), shape, gone, present)
    return gone, present


def _diff(old: Any, new: Any, path: Path, names: tuple[str, ...], shape: Shape, gone: FieldSet, present: FieldSet) -> None:
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict) and old and new and (not names or shape(names)[0] != ATOMIC):
        for key, before in old.items():
            if key not in new:
                _collect(before, (*path, "f:" + key), (*names, key), shape, gone)
            elif before != new[key]:
                _diff(before, new[key], (*path, "f:" + key), (*names, key), shape, gone, present)
        for key, after in new.items():
            if key not in old:
                _collect(after, (*path, "f:" + key), (*names, key), shape, present)
        return
    if isinstance(old, list) and isinstance(new, list) and old and new:
        kind, keys = shape(names)
        if kind == SET:
            before_set, after_set = {_json(v) for v in old}, {_json(v) for v in new}
            gone.update((*path, "v:" + j) for j in before_set - after_set)
            present.update((*path, "v:" + j) for j in after_set - before_set)
            return
        old_ids, new_ids = (_identities(old, keys), _identities(new, keys)) if kind == MAP else (None, None)
        if old_ids is not None and new_ids is not None:
            before, after = dict(zip(old_ids, old, strict=True)), dict(zip(new_ids, new, strict=True))
            for ident, item in before.items():
                if ident not in after:
                    _collect([item], path, names, shape, gone)
                elif item != after[ident]:
                    _diff(item, after[ident], (*path, ident), names, shape, gone, present)
            for ident, item in after.items():
                if ident not in before:
                    _collect([item], path, names, shape, present)
            return
    _collect(old, path, names, shape, gone)
    _collect(new, path, names, shape, present)


# --- FieldsV1 ------------------------------------------------------------------------------


def encode(fields: Iterable[Path]) -> Obj:
    """A set of paths in FieldsV1: nested maps, ``.`` marking a node that is itself a member."""
    root: Obj = {}
    for path in sorted(fields):
        node = root
        for element in path:
            node = node.setdefault(element, {})
        if node:
            node["."] = {}
        else:
            node["."] = None  # a leaf so far; dropped below unless children follow
    return _finish(root)


def _finish(node: Obj) -> Obj:
    out: Obj = {}
    children = {k: v for k, v in node.items() if k != "."}
    if "." in node and children:
        out["."] = {}
    for key, child in children.items():
        out[key] = _finish(child)
    return out


def decode(fields_v1: Any, prefix: Path = ()) -> FieldSet:
    out: FieldSet = set()
    if not isinstance(fields_v1, dict):
        return out
    if prefix and (not fields_v1 or "." in fields_v1):
        out.add(prefix)
    for key, child in fields_v1.items():
        if key != ".":
            out |= decode(child, (*prefix, key))
    return out


def path_string(path: Path) -> str:
    """A path as kube prints it in a conflict: ``.spec.containers[name="app"].image``."""
    parts = []
    for element in path:
        kind, text = element[:1], element[2:]
        if kind == "f":
            parts.append("." + text)
        elif kind == "k":
            parts.append("[" + ",".join(f"{k}={_json(v)}" for k, v in json.loads(text).items()) + "]")
        else:
            parts.append(f"[={text}]")
    return "".join(parts)


# --- managers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Manager:
    """Who writes: one managedFields entry per name, operation, subresource (and apiVersion for Update)."""

    name: str
    operation: str
    api_version: str
    subresource: str = ""

    def owns(self, entry: Obj) -> bool:
        return (entry.get("manager", "") == self.name and entry.get("operation") == self.operation
                and entry.get("subresource", "") == self.subresource
                and (self.operation == APPLY or entry.get("apiVersion") == self.api_version))


def _entry(manager: Manager, fields: FieldSet, time: str) -> Obj:
    entry: Obj = {"manager": manager.name, "operation": manager.operation, "apiVersion": manager.api_version,
                  "time": time, "fieldsType": "FieldsV1", "fieldsV1": encode(fields)}
    if manager.subresource:
        entry["subresource"] = manager.subresource
    return entry


def _describe(entry: Obj) -> str:
    """A manager as kube names it in a conflict message."""
    text = json.dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        text += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == UPDATE:
        text += f" using {entry.get('apiVersion', '')}"
    return text


def _sort_key(entry: Obj) -> tuple[str, str, str, str, str]:
    return (entry.get("operation", ""), entry.get("time", ""), entry.get("manager", ""),
            entry.get("apiVersion", ""), entry.get("subresource", ""))


def _contains(fields_v1: Any, path: Path) -> bool:
    """Whether an encoded set holds ``path`` (without decoding it)."""
    node = fields_v1
    for element in path:
        if not isinstance(node, dict) or element not in node:
            return False
        node = node[element]
    return isinstance(node, dict) and (not node or "." in node)


def _rebuilt(entries: list[tuple[Obj, FieldSet | None]], mine: FieldSet | None, manager: Manager, time: str) -> list[Obj]:
    """The entries with each other manager's new set (None: unchanged, the entry kept as it is,
    time and all) and ``manager``'s new set ``mine`` (None likewise); an empty set's entry goes."""
    out = []
    for entry, fields in entries:
        if manager.owns(entry):
            if mine is None:
                out.append(entry)
        elif fields is None:
            out.append(entry)
        elif fields:
            out.append({**entry, "fieldsV1": encode(fields)})
    if mine:
        out.append(_entry(manager, mine, time))
    return sorted(out, key=_sort_key)


def _entries(obj: Obj | None) -> list[Obj]:
    entries = ((obj or {}).get("metadata") or {}).get("managedFields") or []
    return [e for e in entries if isinstance(e, dict)]


def _losing(entry: Obj, changed: FieldSet) -> FieldSet | None:
    """A manager's set without the ``changed`` fields, or None when it holds none of them."""
    tree = entry.get("fieldsV1")
    hits = {path for path in changed if _contains(tree, path)}
    return decode(tree) - hits if hits else None


def sent_entries(value: Any) -> list[Obj] | None:
    """The managedFields an update or patch sets itself, when they replace the stored ones:
    as in kube, a non-empty list of well-formed entries (``[{}]`` clears every owner, which is
    how a client resets them); anything else keeps the stored ones, so a client that drops
    them drops nothing."""
    if not isinstance(value, list) or not value:
        return None
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("manager", ""), str):
            return None
        if entry.get("operation", UPDATE) not in (APPLY, UPDATE) or not isinstance(entry.get("fieldsV1", {}), dict):
            return None
    return [e for e in value if e.get("fieldsV1")]


def after_update(old: Obj | None, new: Obj, manager: Manager, shape: Shape, time: str,
                 sent: list[Obj] | None = None) -> list[Obj]:
    """managedFields after a create, update or patch by ``manager`` (nameless: nobody gains
    fields), starting from the stored ones or those the write ``sent``. Only the sets a write
    touches are decoded: a status write leaves the spec's owners as they are stored."""
    if old is None and sent is None:
        tree = fields_v1(new, shape)
        return [{**_entry(manager, set(), time), "fieldsV1": tree}] if tree and manager.name else []
    entries = _entries(old) if sent is None else sent
    gone, present = (set(), field_set(new, shape)) if old is None else changes(old, new, shape)
    changed = gone | present
    if not changed:
        return entries
    others: list[tuple[Obj, FieldSet | None]] = [(e, _losing(e, changed)) for e in entries if not manager.owns(e)]
    own = next((e for e in entries if manager.owns(e)), None)
    mine: FieldSet | None = present if manager.name else set()
    if own is not None and manager.name:
        owned = own.get("fieldsV1")
        kept = all(_contains(owned, p) for p in present) and not any(_contains(owned, p) for p in gone - present)
        mine = None if kept else (decode(owned) - gone) | present
    return _rebuilt([*others, *(((own, None),) if own is not None else ())], mine, manager, time)


# --- apply ---------------------------------------------------------------------------------


def _merge(live: Any, config: Any, names: tuple[str, ...], shape: Shape) -> Any:
    if isinstance(config, dict) and isinstance(live, dict) and (not names or shape(names)[0] != ATOMIC):
        out = dict(live)
        for key, value in config.items():
            out[key] = _merge(live[key], value, (*names, key), shape) if key in live else value
        return out
    if isinstance(config, list) and isinstance(live, list):
        kind, keys = shape(names)
        if kind == SET:
            seen = {_json(v) for v in live}
            return live + [v for v in config if _json(v) not in seen]
        live_ids, config_ids = (_identities(live, keys), _identities(config, keys)) if kind == MAP else (None, None)
        if live_ids is not None and config_ids is not None:
            merged = list(live)
            for ident, item in zip(config_ids, config, strict=True):
                if ident in live_ids:
                    i = live_ids.index(ident)
                    merged[i] = _merge(merged[i], item, names, shape)
                else:
                    merged.append(item)
            return merged
    return config


_GONE = object()


def _matches(item: Any, element: str) -> bool:
    if element.startswith("v:"):
        return _json(item) == element[2:]
    if not isinstance(item, dict):
        return False
    return all(item.get(k, _KEY_DEFAULTS.get(k)) == v for k, v in json.loads(element[2:]).items())


def _without(value: Any, path: Path, top: bool = True) -> Any:
    """``value`` with the field at ``path`` removed (copied along the path, shared elsewhere);
    a map or list the removal empties goes with it."""
    if not path:
        return _GONE
    head, rest = path[0], path[1:]
    out: Any = value
    if head.startswith("f:") and isinstance(value, dict):
        key = head[2:]
        if key not in value:
            return value
        child = _without(value[key], rest, False)
        out = dict(value)
        if child is _GONE:
            del out[key]
        else:
            out[key] = child
    elif isinstance(value, list):
        index = next((i for i, item in enumerate(value) if _matches(item, head)), None)
        if index is None:
            return value
        child = _without(value[index], rest, False)
        out = list(value)
        if child is _GONE:
            del out[index]
        else:
            out[index] = child
    return _GONE if not out and value and not top else out


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def applied_part(config: Obj, subresource: str, has_status: bool) -> Obj:
    """What of an applied configuration a write through this endpoint may set: the status
    subresource applies ``status`` only; the main resource of a kind with one everything else.
    Ownership is the server's to record: a configuration naming managedFields is refused."""
    if (config.get("metadata") or {}).get("managedFields") is not None:
        raise errors.bad_request("metadata.managedFields must be nil")
    config = _without_nulls(config)
    if subresource == "status":  # the object's identity (name, uid, resourceVersion) and its status
        identity = {k: v for k, v in (config.get("metadata") or {}).items() if k in _SERVER_METADATA}
        return {k: v for k, v in config.items() if k in ("apiVersion", "kind", "status")} | {"metadata": identity}
    if has_status:
        return {k: v for k, v in config.items() if k != "status"}
    return config


def apply(live: Obj, config: Obj, manager: Manager, shape: Shape, *, force: bool, time: str) -> Obj:
    """The object after ``manager`` applies ``config`` to ``live``, with its managedFields;
    a 409 when it would change fields other managers own, unless ``force``. A uid or
    resourceVersion in ``config`` stays, as the precondition the update checks."""
    entries = [(e, decode(e.get("fieldsV1"))) for e in _entries(live)]
    applied = field_set(config, shape)
    previous = next((f for e, f in entries if manager.owns(e)), set())
    owned_by_others: FieldSet = set()
    for entry, fields in entries:
        if not manager.owns(entry):
            owned_by_others |= fields
    merged: Obj = _merge(live, tracked(config), (), shape)
    for path in sorted(previous - applied - owned_by_others, key=len):
        merged = _without(merged, path)
    changed = changed_fields(live, merged, shape)
    conflicts = [(path, entry) for entry, fields in entries if not manager.owns(entry) for path in sorted(fields & changed)]
    last_applied = _last_applied(live) if manager.name == KUBECTL and not manager.subresource else None
    if conflicts and last_applied is not None:  # kubectl taking over what its client-side apply set
        allowed = field_set(last_applied, shape)
        conflicts = [(path, entry) for path, entry in conflicts if path not in allowed]
    if conflicts and not force:
        raise _conflict_error(conflicts)
    if last_applied is not None:
        merged = _with_last_applied(merged, config)
    kept = [(e, None if manager.owns(e) or not f & changed else f - changed) for e, f in entries]
    preconditions = {k: v for k, v in (config.get("metadata") or {}).items() if k in ("uid", "resourceVersion")}
    merged["metadata"] = {**merged.get("metadata", {}), **preconditions, "managedFields": _rebuilt(kept, None if applied == previous else applied, manager, time)}
    return merged


def _last_applied(live: Obj) -> Obj | None:
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _with_last_applied(merged: Obj, config: Obj) -> Obj:
    """kubectl's client-side apply annotation kept in step with what it applies server-side,
    so a later client-side apply computes its patch from it (as kube-apiserver keeps it)."""
    meta = dict(config.get("metadata") or {})
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    text = orjson.dumps({**config, "metadata": meta}, option=orjson.OPT_SORT_KEYS).decode() + "\n"
    annotations = {**(merged["metadata"].get("annotations") or {}), LAST_APPLIED: text}
    return {**merged, "metadata": {**merged["metadata"], "annotations": annotations}}


def created_by_apply(config: Obj, manager: Manager, shape: Shape, time: str) -> list[Obj]:
    """managedFields of an object an apply creates: the applier owns what it applied."""
    return _rebuilt([], field_set(config, shape), manager, time)


def shape_of(is_custom: bool, schema: Obj | None) -> Shape:
    return schema_shape(schema) if is_custom else builtin_shape


def _conflict_error(conflicts: list[tuple[Path, Obj]]) -> errors.ApiError:
    causes = [Cause(path_string(path), "FieldManagerConflict", f"conflict with {_describe(entry)}")
              for path, entry in conflicts]
    if len(conflicts) == 1:
        path, entry = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_describe(entry)}: {path_string(path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for path, entry in conflicts:
            by_manager.setdefault(_describe(entry), []).append(path_string(path))
        lines = [line for who in sorted(by_manager) for line in (f"conflicts with {who}:", *(f"- {p}" for p in by_manager[who]))]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.ApiError(409, "Conflict", message, {}, causes)
