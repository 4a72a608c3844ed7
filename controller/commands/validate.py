"""``trainctl validate -f FILE``: check job manifests offline, every problem at once.

The same rules the controller applies before it touches a job (``api.validation``), run on
files so users find mistakes before they submit. Each problem is one line prefixed by the
object it belongs to; the exit status is 1 if there was any problem, 0 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

from api.loader import Document, read_documents
from api.validation import validate, warnings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check PyTorchJob/MSJob manifests without a cluster",
        description=(
            "Check the PyTorchJob and MSJob objects in each FILE (YAML or JSON, multi-document) against "
            "every rule the controller applies. Prints each problem on its own line and exits 1 if there "
            "is any; otherwise says each object is valid and exits 0."
        ),
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="manifest to check; - for stdin; repeat for several files",
    )
    parser.set_defaults(func=run)


def run(args: Any) -> int:
    ok = True
    for filename in args.filename:
        ok = validate_file(filename, sys.stdout, sys.stderr) and ok
    return 0 if ok else 1


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
    source = "<stdin>" if filename == "-" else filename
    return f"{source}: {document.where}"


def validate_file(filename: str, out: TextIO, err: TextIO) -> bool:
    source = "<stdin>" if filename == "-" else filename
    try:
        text = read_source(filename)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"{source}: cannot read: {reason}", file=err)
        return False
    documents = read_documents(text)
    if not documents:
        print(f"{source}: no objects found", file=err)
        return False
    ok = True
    for document in documents:
        label = object_label(filename, document)
        if document.error is not None:
            print(f"{source}: {document.where}: {document.error}", file=err)
            ok = False
            continue
        problems = validate(document.obj)
        for problem in problems:
            print(f"{label}: {problem}", file=err)
        if problems:
            ok = False
            continue
        for warning in warnings(document.obj):
            print(f"{label}: warning: {warning}", file=err)
        print(f"{label} is valid", file=out)
    return ok
