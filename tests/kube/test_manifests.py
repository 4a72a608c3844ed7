"""The kustomize manifests render, validate against the Kubernetes schemas, and are locked down;
the Deployment runs the command the controller image runs."""

from __future__ import annotations

import json
import pathlib
import subprocess
from importlib.metadata import entry_points

import kubernetes_validate
import pytest
import yaml

from tests.support.repo import REPO

MANIFESTS = REPO / "manifests"
SCHEMA_VERSION = "1.32.0"  # the kubectl this project tests with


def render(path: pathlib.Path) -> list[dict]:
    out = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


@pytest.fixture(scope="module")
def cluster_install() -> list[dict]:
    return render(MANIFESTS)


@pytest.fixture(scope="module")
def namespace_install() -> list[dict]:
    return render(MANIFESTS / "overlays" / "single-namespace")


def test_the_base_renders_everything_a_cluster_needs(cluster_install):
    kinds = sorted(o["kind"] for o in cluster_install)
    assert kinds == sorted(
        [
            "Namespace",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Deployment",
            "Service",
        ]
    )
    crds = {o["metadata"]["name"] for o in by_kind(cluster_install, "CustomResourceDefinition")}
    assert crds == {"pytorchjobs.kubeflow.org", "msjobs.mindspore.gitee.com"}


@pytest.mark.parametrize("install", ["cluster_install", "namespace_install"])
def test_every_rendered_object_validates_against_the_kubernetes_schemas(install, request):
    for obj in request.getfixturevalue(install):
        try:
            kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:  # pragma: no cover - the failure message
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message} at {'.'.join(map(str, exc.path))}")


def test_the_deployment_is_locked_down_and_pinned(cluster_install):
    (deployment,) = by_kind(cluster_install, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["image"].endswith(":0.1.0")
    assert set(container["resources"]) == {"requests", "limits"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "--leader-elect" in container["args"]
    assert pod["serviceAccountName"] == "trainctl-controller"


def dockerfile_stages() -> dict[str, list[list[str]]]:
    """The Dockerfile's instructions (each split in words) by stage name, in build order."""
    stages: dict[str, list[list[str]]] = {}
    for line in (REPO / "Dockerfile").read_text().splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "FROM":
            stages[words[-1]] = []
        stages[next(reversed(stages))].append(words)
    return stages


def test_the_deployment_and_the_controller_image_run_the_controller_distributions_command(cluster_install):
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.value == "trainctl.controller.main:main"]
    assert script.dist is not None and script.dist.name == "trainctl-controller"
    (deployment,) = by_kind(cluster_install, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == [script.name]

    stages = dockerfile_stages()
    assert list(stages)[-1] == "controller", "the default target is the controller image"
    controller = stages["controller"]
    (entrypoint,) = [words for words in controller if words[0] == "ENTRYPOINT"]
    assert json.loads(" ".join(entrypoint[1:])) == [script.name]
    # It copies the virtualenv of a stage that installed api/ and controller/, and nothing else.
    (source,) = [words[1].removeprefix("--from=") for words in controller if words[0] == "COPY"]
    copied = [words[1:] for words in stages[source] if words[0] == "COPY"]
    assert copied == [["api", "./api"], ["controller", "./controller"]]


def test_the_cluster_role_has_no_wildcards(cluster_install):
    for role in by_kind(cluster_install, "ClusterRole") + by_kind(cluster_install, "Role"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (role["metadata"]["name"], rule)


# What a ClusterRoleBinding may grant: resources without a namespace (a RoleBinding cannot).
CLUSTER_SCOPED = {("", "nodes")}


def test_every_install_grants_the_cluster_scoped_resources_cluster_wide_and_nothing_else_there(cluster_install,
                                                                                              namespace_install):
    for install in (cluster_install, namespace_install):
        roles = {o["metadata"]["name"]: o for o in by_kind(install, "ClusterRole")}
        wide = {(group, resource)
                for binding in by_kind(install, "ClusterRoleBinding")
                for rule in roles[binding["roleRef"]["name"]]["rules"]
                for group in rule["apiGroups"] for resource in rule["resources"]}
        assert CLUSTER_SCOPED <= wide
    namespace_roles = {o["metadata"]["name"]: o for o in by_kind(namespace_install, "ClusterRole")}
    (binding,) = by_kind(namespace_install, "ClusterRoleBinding")
    granted = {(group, resource) for rule in namespace_roles[binding["roleRef"]["name"]]["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]}
    assert granted == CLUSTER_SCOPED
    assert binding["metadata"]["name"].endswith("-training")  # one per install: another namespace's is apart


def test_the_single_namespace_overlay_confines_the_controller(namespace_install):
    kinds = {o["kind"] for o in namespace_install}
    assert "CustomResourceDefinition" not in kinds
    for obj in namespace_install:
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding", "Namespace"):
            assert obj["metadata"]["namespace"] == "training", obj["metadata"]["name"]
        for subject in obj.get("subjects", ()):
            assert subject["namespace"] == "training"
    binding = next(o for o in namespace_install if o["kind"] == "RoleBinding" and o["roleRef"]["kind"] == "ClusterRole")
    assert binding["roleRef"]["name"] == "trainctl-controller"
    (deployment,) = by_kind(namespace_install, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=$(POD_NAMESPACE)" in args
