"""The RBAC authorizer: may this user do this, as kube-apiserver's RBAC authorizer decides.

Pure: plain dicts in (the user as a SubjectAccessReview's ``user``/``groups``, the request as
its ``resourceAttributes`` or ``nonResourceAttributes``, the Roles, ClusterRoles and bindings
as stored), a :class:`Decision` out. Nothing here reads the store or the clock, so the rules
are tested with dicts alone and the server decides with the same code for every route.

The rules are Kubernetes': a ClusterRoleBinding grants its ClusterRole's rules everywhere; a
RoleBinding grants its Role's (or a ClusterRole's) rules in its own namespace only. A rule
matches when its ``verbs``, ``apiGroups`` and ``resources`` (``pods/log`` for a subresource,
``*/scale`` for one subresource of any resource) hold the request's or ``*``, and its
``resourceNames`` are empty or hold the request's name; a non-resource rule when its
``nonResourceURLs`` hold the path exactly or by a prefix ending in ``*``. Members of
``system:masters`` may do anything without any binding, as kube-apiserver's privileged-group
authorizer lets them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

MASTERS = "system:masters"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


@dataclass
class Policy:
    """The RBAC objects that decide: as stored, in any order."""

    roles: list[Obj] = field(default_factory=list)
    cluster_roles: list[Obj] = field(default_factory=list)
    role_bindings: list[Obj] = field(default_factory=list)
    cluster_role_bindings: list[Obj] = field(default_factory=list)

    def cluster_role(self, name: str) -> Obj | None:
        return next((r for r in self.cluster_roles if _meta(r).get("name") == name), None)

    def role(self, namespace: str, name: str) -> Obj | None:
        return next((r for r in self.roles if _meta(r).get("namespace") == namespace and _meta(r).get("name") == name), None)


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


# --- who a binding names -------------------------------------------------------------------

def subject_matches(subject: Obj, user: Obj, binding_namespace: str) -> bool:
    """Whether ``subject`` of a binding (in ``binding_namespace``, "" for a ClusterRoleBinding)
    names ``user`` (``{"user": ..., "groups": [...]}``)."""
    kind, name = subject.get("kind"), subject.get("name")
    username = user.get("user") or ""
    if kind == "User":
        return bool(name) and name == username
    if kind == "Group":
        return bool(name) and name in _strings(user.get("groups"))
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(name) and bool(namespace) and username == f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"
    return False


def _subject_label(subject: Obj, binding_namespace: str) -> str:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        return f'ServiceAccount "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


# --- what a rule allows -------------------------------------------------------------------

def _has(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def _resource_matches(rule_resources: list[str], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for entry in rule_resources:
        if entry in ("*", combined):
            return True
        if subresource and entry == f"*/{subresource}":
            return True
    return False


def rule_allows(rule: Obj, attributes: Obj) -> bool:
    """Whether one PolicyRule allows the request ``attributes`` (resource or non-resource)."""
    verb = attributes.get("verb") or ""
    if not _has(_strings(rule.get("verbs")), verb):
        return False
    if "path" in attributes:  # non-resource
        path = attributes["path"]
        for url in _strings(rule.get("nonResourceURLs")):
            if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
                return True
        return False
    if not _has(_strings(rule.get("apiGroups")), attributes.get("group") or ""):
        return False
    if not _resource_matches(_strings(rule.get("resources")), attributes.get("resource") or "",
                             attributes.get("subresource") or ""):
        return False
    names = _strings(rule.get("resourceNames"))
    return not names or (attributes.get("name") or "") in names


# --- which rules a user has ----------------------------------------------------------------

@dataclass(frozen=True)
class Grant:
    """The rules a user holds through one binding, and how to name that binding."""

    rules: list[Obj]
    source: str  # ClusterRoleBinding "x" of ClusterRole "y", RoleBinding "x/ns" of Role "y"
    subject: str


def _role_rules(policy: Policy, ref: Any, namespace: str) -> tuple[list[Obj], str] | None:
    if not isinstance(ref, dict) or ref.get("apiGroup", RBAC_GROUP) != RBAC_GROUP:
        return None
    name = ref.get("name") or ""
    if ref.get("kind") == "ClusterRole":
        role = policy.cluster_role(name)
    elif ref.get("kind") == "Role" and namespace:
        role = policy.role(namespace, name)
    else:
        return None
    if role is None:
        return None
    return [r for r in role.get("rules") or [] if isinstance(r, dict)], f'{ref["kind"]} "{name}"'


def grants(policy: Policy, user: Obj, namespace: str) -> Iterator[Grant]:
    """Every binding naming ``user`` that applies in ``namespace`` ("" : cluster-wide only)."""
    bindings: Iterable[tuple[Obj, str, str]] = [(b, "", "ClusterRoleBinding") for b in policy.cluster_role_bindings]
    if namespace:
        bindings = [*bindings, *((b, namespace, "RoleBinding") for b in policy.role_bindings
                                 if _meta(b).get("namespace") == namespace)]
    for binding, binding_ns, kind in bindings:
        subject = next((s for s in binding.get("subjects") or [] if isinstance(s, dict)
                        and subject_matches(s, user, binding_ns)), None)
        if subject is None:
            continue
        found = _role_rules(policy, binding.get("roleRef"), binding_ns)
        if found is None:
            continue
        rules, role = found
        name = _meta(binding).get("name")
        label = f'{kind} "{name}/{binding_ns}"' if binding_ns else f'{kind} "{name}"'
        yield Grant(rules, f"{label} of {role}", _subject_label(subject, binding_ns))


def authorize(policy: Policy, user: Obj, attributes: Obj) -> Decision:
    """The decision for ``user`` doing ``attributes``, with kube's reason when allowed."""
    if MASTERS in _strings(user.get("groups")):
        return Decision(True)
    namespace = "" if "path" in attributes else (attributes.get("namespace") or "")
    for grant in grants(policy, user, namespace):
        if any(rule_allows(rule, attributes) for rule in grant.rules):
            return Decision(True, f"RBAC: allowed by {grant.source} to {grant.subject}")
    return Decision(False)


def rules_for(policy: Policy, user: Obj, namespace: str) -> tuple[list[Obj], list[Obj]]:
    """(resource rules, non-resource rules) ``user`` holds in ``namespace``: a
    SelfSubjectRulesReview's status, each rule as ``{verbs, apiGroups, resources,
    resourceNames}`` or ``{verbs, nonResourceURLs}``."""
    if MASTERS in _strings(user.get("groups")):
        return ([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                [{"verbs": ["*"], "nonResourceURLs": ["*"]}])
    resource_rules: list[Obj] = []
    non_resource_rules: list[Obj] = []
    for grant in grants(policy, user, namespace):
        for rule in grant.rules:
            if _strings(rule.get("nonResourceURLs")):
                entry = {"verbs": _strings(rule.get("verbs")), "nonResourceURLs": _strings(rule.get("nonResourceURLs"))}
                target = non_resource_rules
            else:
                entry = {"verbs": _strings(rule.get("verbs")), "apiGroups": _strings(rule.get("apiGroups")),
                         "resources": _strings(rule.get("resources"))}
                if _strings(rule.get("resourceNames")):
                    entry["resourceNames"] = _strings(rule.get("resourceNames"))
                target = resource_rules
            if entry not in target:
                target.append(entry)
    return resource_rules, non_resource_rules


def forbidden_message(user: Obj, attributes: Obj) -> str:
    """kube-apiserver's wording of a refusal."""
    username = user.get("user") or ""
    verb = attributes.get("verb") or ""
    if "path" in attributes:
        return f'forbidden: User "{username}" cannot {verb} path "{attributes["path"]}"'
    resource, subresource = attributes.get("resource") or "", attributes.get("subresource") or ""
    group, name, namespace = attributes.get("group") or "", attributes.get("name") or "", attributes.get("namespace") or ""
    qualified = f"{resource}.{group}" if group else resource
    what = f'{qualified} "{name}"' if name else qualified
    target = f"{resource}/{subresource}" if subresource else resource
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    return f'{what} is forbidden: User "{username}" cannot {verb} resource "{target}" in API group "{group}"{where}'


# --- what a user may grant: kube's escalation check ------------------------------------------

def _atoms(rule: Obj) -> Iterator[Obj]:
    """``rule`` broken into rules of one verb and one group, resource and name (or URL)."""
    verbs = _strings(rule.get("verbs"))
    for url in _strings(rule.get("nonResourceURLs")):
        for verb in verbs:
            yield {"verbs": [verb], "nonResourceURLs": [url]}
    for group in _strings(rule.get("apiGroups")):
        for resource in _strings(rule.get("resources")):
            for verb in verbs:
                names = _strings(rule.get("resourceNames"))
                if not names:
                    yield {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                for name in names:
                    yield {"apiGroups": [group], "resources": [resource], "resourceNames": [name], "verbs": [verb]}


def _covers(owner: Obj, atom: Obj) -> bool:
    """Whether rule ``owner`` holds the one-verb rule ``atom``: a literal ``*`` in the
    request is held only by ``*``; ``*/sub`` holds ``sub`` of every resource."""
    if not _has(_strings(owner.get("verbs")), atom["verbs"][0]):
        return False
    if "nonResourceURLs" in atom:
        url = atom["nonResourceURLs"][0]
        return any(o in ("*", url) or (o.endswith("*") and url.startswith(o[:-1]))
                   for o in _strings(owner.get("nonResourceURLs")))
    if not _has(_strings(owner.get("apiGroups")), atom["apiGroups"][0]):
        return False
    resource = atom["resources"][0]
    resources = _strings(owner.get("resources"))
    sub = resource.partition("/")[2]
    if not (_has(resources, resource) or (sub and f"*/{sub}" in resources)):
        return False
    names = _strings(owner.get("resourceNames"))
    return not names or any(n in names for n in atom.get("resourceNames", [None]))


def not_held(owner_rules: list[Obj], rules: Iterable[Obj]) -> list[Obj]:
    """The parts of ``rules`` that no rule of ``owner_rules`` holds (kube's ``Covers``),
    rules differing only in their verb merged into one (kube's ``CompactRules``)."""
    missing: list[Obj] = []
    for rule in rules:
        for atom in _atoms(rule):
            if any(_covers(owner, atom) for owner in owner_rules):
                continue
            simple = next((m for m in missing if "resourceNames" not in atom and "nonResourceURLs" not in atom
                           and {k: v for k, v in m.items() if k != "verbs"} == {k: v for k, v in atom.items() if k != "verbs"}), None)
            if simple is None:
                missing.append(dict(atom))
            elif atom["verbs"][0] not in simple["verbs"]:
                simple["verbs"] = [*simple["verbs"], atom["verbs"][0]]
    return missing


def _go_quoted(values: list[str]) -> str:
    """A list of strings as Go's ``%q`` prints a ``[]string``."""
    return "[" + " ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "]"


def compact_string(rule: Obj) -> str:
    """One rule as kube's escalation errors print it."""
    parts = [f"{label}:{_go_quoted(_strings(rule.get(key)))}" for label, key in (
        ("APIGroups", "apiGroups"), ("Resources", "resources"), ("NonResourceURLs", "nonResourceURLs"),
        ("ResourceNames", "resourceNames"), ("Verbs", "verbs")) if _strings(rule.get(key))]
    return "{" + ", ".join(parts) + "}"


def escalation_message(user: Obj, missing: list[Obj]) -> str:
    """kube's reason for refusing a Role or binding that grants what its writer does not hold."""
    described = sorted({compact_string(rule) for rule in missing})
    return (f'user "{user.get("user") or ""}" (groups={_go_quoted(_strings(user.get("groups")))}) is attempting to '
            f"grant RBAC permissions not currently held:\n" + "\n".join(described))


def held_rules(policy: Policy, user: Obj, namespace: str) -> list[Obj]:
    """Every rule ``user`` holds in ``namespace`` ("" : cluster-wide), as kube's rule resolver's ``RulesFor``."""
    if MASTERS in _strings(user.get("groups")):
        return [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]}]
    return [rule for grant in grants(policy, user, namespace) for rule in grant.rules]
