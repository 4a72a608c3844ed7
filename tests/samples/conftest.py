"""Fixtures for the sample tests: the sample scripts, imported by path (they are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests.support.repo import REPO


def _load(relative: str) -> ModuleType:
    path = REPO / relative
    name = "sample_" + "_".join(path.with_suffix("").relative_to(REPO).parts)
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def train() -> ModuleType:
    return _load("samples/pytorch/train.py")


@pytest.fixture(scope="session")
def mnist() -> ModuleType:
    return _load("samples/kubeflow/mnist.py")


@pytest.fixture(scope="session")
def bench() -> ModuleType:
    return _load("hack/bench_recovery.py")


def pytest_configure(config: pytest.Config) -> None:
    # torch warns on import when numpy is absent; the samples do not need numpy.
    config.addinivalue_line("filterwarnings", "ignore:Failed to initialize NumPy")
