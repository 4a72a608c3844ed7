"""``python -m trainctl.cluster.network --dir DIR``: the isolated pod network's router.

The supervisor starts it under ``unshare -U -r -n -m`` (see :mod:`.router`)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster.network.router import NetworkSetupError, serve


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainctl.cluster.network")
    parser.add_argument("--dir", required=True, help="cluster directory")
    parser.add_argument("--service-cidr", required=True, help="the ClusterIP range the router serves")
    parser.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    def on_signal(_signum: int, _frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        serve(Path(args.dir).resolve(), args.service_cidr, args.ready_fd)
    except (NetworkSetupError, OSError) as exc:
        print(f"network: cannot build the pod network: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
