"""The ``trainctl`` command: one entry point, one module per subcommand.

Each subcommand lives in its own module with ``register(subparsers)``, which adds its
parser and sets ``func``; this file only wires them together, so commands stay
independent and import their heavy dependencies only when they run.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand modules, in the order ``trainctl --help`` lists them.
COMMAND_MODULES = (
    "trainctl.cli.run",
    "trainctl.cli.validate",
    "trainctl.cli.render",
    "trainctl.cli.timeline",
    "trainctl.cli.local",
    "trainctl.cli.controller",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainctl",
        description="Run distributed training jobs (PyTorchJob, MSJob) on Kubernetes or on this machine.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
