"""Paths into the source checkout that tests read or run from: the root, samples/, manifests/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
CRDS = REPO / "manifests" / "crds"
