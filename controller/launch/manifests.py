"""Jobs to launch, read from text and checked before anything reaches a cluster.

``trainctl run`` and the pipeline components reject bad input up front, with the same
one-line-per-problem messages as ``trainctl validate``, instead of letting the API server
or the controller discover it halfway through.
"""

from __future__ import annotations

from typing import Any

from api.loader import read_documents


class ManifestInvalid(ValueError):
    """The text holds no usable job; ``problems`` has one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def read_jobs(text: str, source: str) -> list[dict[str, Any]]:
    """Every job in a multi-document YAML (or JSON) text, or ``ManifestInvalid`` listing every problem."""
    from api.validation import validate

    problems: list[str] = []
    jobs: list[dict[str, Any]] = []
    for document in read_documents(text):
        if document.error is not None:
            problems.append(f"{source}: {document.where}: {document.error}")
            continue
        errors = validate(document.obj)
        if errors:
            problems.extend(f"{source}: {document.where}: {error}" for error in errors)
        else:
            jobs.append(document.obj)
    if not problems and not jobs:
        problems.append(f"{source}: no job found (expected a PyTorchJob or MSJob)")
    if problems:
        raise ManifestInvalid(problems)
    return jobs
