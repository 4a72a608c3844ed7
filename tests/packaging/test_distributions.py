"""Each distribution of the repository imports only what its requirements install.

trainctl-api brings pydantic and PyYAML, so ``pip install ./api`` alone validates a job;
trainctl-controller brings trainctl-api and the Kubernetes client stack, so the controller
image needs neither the CLI nor the embedded cluster. An import of anything else would work
in the development environment, where everything is installed, and fail only there.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions, requires
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.repo import REPO

# Where each distribution's portion of the trainctl namespace package lives.
PORTIONS = {"trainctl-api": REPO / "api", "trainctl-controller": REPO / "controller", "trainctl": REPO}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_with(distribution: str) -> set[str]:
    """The distribution and every distribution its requirements install here (no extras)."""
    seen: set[str] = set()
    todo = [distribution]
    while todo:
        name = canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for text in requires(name) or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def owner_of(module: str) -> str:
    """The distribution whose portion holds ``trainctl.<package>``."""
    package = module.split(".")[1]
    for distribution, root in PORTIONS.items():
        if (root / "trainctl" / package).is_dir():
            return distribution
    raise AssertionError(f"{module} is in no portion of trainctl")


# Programs whose source the controller sends into a job's pods (``python -c``), where the job's
# own image provides what they import (torch); the controller never imports them.
IN_POD_PROGRAMS = {REPO / "controller" / "trainctl" / "controller" / "node_check_probe.py"}


def imports(root: Path) -> dict[str, Path]:
    """Every absolute import under ``root/trainctl``: module -> a file that imports it."""
    found: dict[str, Path] = {}
    for path in sorted(p for p in (root / "trainctl").rglob("*.py") if p.resolve() not in IN_POD_PROGRAMS):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update((alias.name, path) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found[node.module] = path
    return found


def undeclared(distribution: str) -> list[str]:
    allowed = installed_with(distribution)
    providers = packages_distributions()
    wrong = []
    for module, path in imports(PORTIONS[distribution]).items():
        top = module.split(".")[0]
        if top in sys.stdlib_module_names:
            continue
        if top == "trainctl":
            by = {owner_of(module)}
        else:
            by = {canonical(name) for name in providers.get(top, [])}
        if not by & allowed:
            wrong.append(f"{path.relative_to(REPO)} imports {module} (from {sorted(by) or 'nothing installed'})")
    return wrong


@pytest.mark.parametrize("distribution", ["trainctl-api", "trainctl-controller"])
def test_a_distribution_imports_only_what_its_requirements_install(distribution):
    assert undeclared(distribution) == []


def test_the_check_sees_the_api_and_the_controller_imports():
    assert {"pydantic", "yaml", "trainctl.api.common"} <= set(imports(PORTIONS["trainctl-api"]))
    assert {"kubernetes", "trainctl.api", "trainctl.kube.client"} <= set(imports(PORTIONS["trainctl-controller"]))
    assert "kubernetes" not in installed_with("trainctl-api")
    assert "trainctl" not in installed_with("trainctl-controller")
    assert all(path.is_file() for path in IN_POD_PROGRAMS)  # an exemption that names nothing hides nothing
