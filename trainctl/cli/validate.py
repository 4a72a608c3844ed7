"""``trainctl validate -f FILE``: check job manifests offline, every problem at once.

The same rules the controller applies before it touches a job (``trainctl.api.validation``), run on
files so users find mistakes before they submit. Each problem is one line prefixed by the
object it belongs to; the exit status is 1 if there was any problem, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from trainctl.launch.manifests import FieldValidation, check_text, read_source, source_name

# kubectl's --validate values (true and false are the old spellings of strict and ignore).
_FIELD_VALIDATION: dict[str, FieldValidation] = {
    "strict": "Strict", "true": "Strict", "warn": "Warn", "ignore": "Ignore", "false": "Ignore",
}


def field_validation(value: str) -> FieldValidation:
    """``--validate``'s value, as kubectl takes it."""
    try:
        return _FIELD_VALIDATION[value.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"invalid value {value!r}: must be one of: strict (or true), warn, ignore (or false)") from None


def add_validate_flag(parser: Any) -> None:
    """``--validate``: what an unknown field is, as for ``kubectl apply``."""
    parser.add_argument(
        "--validate",
        dest="field_validation",
        nargs="?",
        const="strict",
        default="strict",
        type=field_validation,
        metavar="MODE",
        help="unknown fields: strict (default; an error, as kubectl apply's API server refuses them), "
             "warn (a warning), or ignore; true and false mean strict and ignore",
    )


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
    add_validate_flag(parser)
    parser.set_defaults(func=run)


def run(args: Any) -> int:
    ok = True
    for filename in args.filename:
        ok = validate_file(filename, sys.stdout, sys.stderr, args.field_validation) and ok
    return 0 if ok else 1


def read_or_report(filename: str, err: TextIO) -> str | None:
    """The file's text, or None after one line on ``err`` saying why it cannot be read."""
    try:
        return read_source(filename)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"{source_name(filename)}: cannot read: {reason}", file=err)
        return None


def validate_text(
    text: str, filename: str, out: TextIO, err: TextIO, field_validation: FieldValidation = "Strict",
) -> list[dict[str, Any]] | None:
    """Report every problem of ``text``; its objects when there is none, else None."""
    checked = check_text(text, filename, field_validation)
    for item in checked:
        for line in item.problems + item.warnings:
            print(line, file=err)
        if not item.problems:
            print(f"{item.label} is valid", file=out)
    if any(item.problems for item in checked):
        return None
    return [item.obj for item in checked if item.obj is not None]


def validate_file(filename: str, out: TextIO, err: TextIO, field_validation: FieldValidation = "Strict") -> bool:
    text = read_or_report(filename, err)
    return text is not None and validate_text(text, filename, out, err, field_validation) is not None
