"""Shared fixtures for the API tests: the samples of the specs, and a way to vary them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from trainctl.api.loader import load_documents

SAMPLES = Path(__file__).parent / "samples"
DELETE = "<delete>"  # as a value in mutate(): remove the key


def load_sample(name: str) -> dict[str, Any]:
    [obj] = load_documents((SAMPLES / name).read_text())
    return obj


def mutate(obj: dict[str, Any], changes: dict[tuple[Any, ...], Any]) -> dict[str, Any]:
    """A deep copy of ``obj`` with each key path set to a value (or removed, with DELETE)."""
    out = copy.deepcopy(obj)
    for path, value in changes.items():
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
        if value == DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = copy.deepcopy(value)
    return out


@pytest.fixture
def pytorchjob() -> dict[str, Any]:
    return load_sample("pytorch_mnist.yaml")


@pytest.fixture
def msjob() -> dict[str, Any]:
    return load_sample("msjob_dataparallel.yaml")


@pytest.fixture(name="mutate")
def mutate_fixture():
    return mutate


@pytest.fixture(name="load_sample")
def load_sample_fixture():
    return load_sample
