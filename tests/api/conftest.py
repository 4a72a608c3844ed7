"""Shared fixtures for the API tests: the samples of the specs, and a way to vary them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainctl.api.loader import load_documents

from tests.support.jobs import mutate

SAMPLES = Path(__file__).parent / "samples"


def load_sample(name: str) -> dict[str, Any]:
    [obj] = load_documents((SAMPLES / name).read_text())
    return obj


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
