"""Jobs to launch, read from text and checked before anything reaches a cluster.

``trainctl run`` and the pipeline components reject bad input up front, with exactly the
lines ``trainctl validate`` prints (same rules, same labels), instead of letting the API
server or the controller discover it halfway through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from api.loader import read_documents
from api.validation import validate, warnings

# How `trainctl validate` names an object in its messages (``PyTorchJob/mnist``, else its place in the file).
from controller.commands.validate import object_label


class ManifestInvalid(ValueError):
    """The text holds no usable job; ``problems`` has one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class Manifest:
    jobs: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


def read_jobs(text: str, filename: str) -> Manifest:
    """Every job in a multi-document YAML (or JSON) text, or ``ManifestInvalid`` listing every problem.

    ``filename`` is how the text was named on the command line (``-`` for stdin).
    """
    source = "<stdin>" if filename == "-" else filename
    documents = read_documents(text)
    if not documents:
        raise ManifestInvalid([f"{source}: no objects found"])
    problems: list[str] = []
    manifest = Manifest(jobs=[])
    for document in documents:
        if document.error is not None:
            problems.append(f"{source}: {document.where}: {document.error}")
            continue
        label = object_label(filename, document)
        errors = validate(document.obj)
        problems.extend(f"{label}: {error}" for error in errors)
        if not errors:
            manifest.jobs.append(document.obj)
            manifest.warnings.extend(f"{label}: warning: {warning}" for warning in warnings(document.obj))
    if problems:
        raise ManifestInvalid(problems)
    return manifest
