"""``trainctl controller``: the controller distribution's command (:mod:`trainctl.controller.main`)
as a subcommand, so a laptop with the CLI runs the same controller the image runs."""

from __future__ import annotations

import argparse

from trainctl.controller import main as controller


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("controller", help=controller.HELP, description=controller.DESCRIPTION)
    controller.add_arguments(p)
    p.set_defaults(func=controller.run)
