"""Jobs to launch, read from text and checked before anything reaches a cluster.

``trainctl run`` and the pipeline components reject bad input up front, with exactly the
lines ``trainctl validate`` prints (same rules, same labels), instead of letting the API
server or the controller discover it halfway through.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trainctl.api.loader import Document, read_documents
from trainctl.api.validation import check, deprecations, unknown_fields

# What an unknown field is, as kube-apiserver's ``fieldValidation`` says it (kubectl's
# ``--validate=strict|warn|ignore``): a problem, a warning, or nothing.
FieldValidation = Literal["Strict", "Warn", "Ignore"]


class ManifestInvalid(ValueError):
    """The text holds no usable job; ``problems`` has one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class Manifest:
    jobs: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


@dataclass
class CheckedObject:
    """One document of a manifest as ``trainctl validate`` reports it: whole message lines."""

    label: str
    obj: dict[str, Any] | None
    problems: list[str]
    warnings: list[str]


def source_name(filename: str) -> str:
    """How a file named on the command line is named in messages (``-`` is stdin)."""
    return "<stdin>" if filename == "-" else filename


def read_source(filename: str) -> str:
    if filename == "-":
        return sys.stdin.read()
    return Path(filename).read_text(encoding="utf-8")


def object_label(filename: str, document: Document) -> str:
    """How a problem names its object: ``PyTorchJob/mnist``, else where it is in the file."""
    obj = document.obj or {}
    kind = obj.get("kind")
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if name is None and isinstance(metadata, dict) and isinstance(metadata.get("generateName"), str):
        name = metadata["generateName"] + "*"
    if isinstance(kind, str) and isinstance(name, str) and kind and name:
        return f"{kind}/{name}"
    return f"{source_name(filename)}: {document.where}"


def check_text(text: str, filename: str, field_validation: FieldValidation = "Strict") -> list[CheckedObject]:
    """Every document of a multi-document YAML (or JSON) text with its problems and warnings.

    A text without any object is one entry whose problem says so. Unknown fields are problems
    under ``Strict`` (as ``kubectl apply`` has the API server refuse them), else warnings or nothing.
    """
    source = source_name(filename)
    documents = read_documents(text)
    if not documents:
        return [CheckedObject(source, None, [f"{source}: no objects found"], [])]
    checked = []
    for document in documents:
        label = object_label(filename, document)
        if document.error is not None:
            checked.append(CheckedObject(label, None, [f"{source}: {document.where}: {document.error}"], []))
            continue
        job, errors = check(document.obj, pod_templates=True)
        unknown = [] if field_validation == "Ignore" else unknown_fields(document.obj, job)
        problems = [f"{label}: {problem}" for problem in errors]
        problems += [f"{label}: {line}" for line in unknown if field_validation == "Strict"]
        notes = deprecations(document.obj) + (unknown if field_validation == "Warn" else [])
        notes = [] if problems else [f"{label}: warning: {note}" for note in notes]
        checked.append(CheckedObject(label, document.obj, problems, notes))
    return checked


def read_jobs(text: str, filename: str, field_validation: FieldValidation = "Strict") -> Manifest:
    """Every job in a multi-document YAML (or JSON) text, or ``ManifestInvalid`` listing every problem.

    ``filename`` is how the text was named on the command line (``-`` for stdin).
    """
    checked = check_text(text, filename, field_validation)
    problems = [line for item in checked for line in item.problems]
    if problems:
        raise ManifestInvalid(problems)
    return Manifest(jobs=[item.obj for item in checked if item.obj is not None],
                    warnings=[line for item in checked for line in item.warnings])
