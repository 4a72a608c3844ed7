#!/usr/bin/env python3
"""Write manifests/crds/ from the API models; with --check, fail if the files are stale.

    python hack/gen_crds.py           # regenerate
    python hack/gen_crds.py --check   # CI: exit 1 and name each file that differs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The checkout's trainctl.api (api/trainctl/api), whether or not it is installed.
sys.path.insert(0, str(ROOT / "api"))

from trainctl.api.crd import crds, render  # noqa: E402

CRD_DIR = ROOT / "manifests" / "crds"


def main(argv: list[str] | None = None, crd_dir: Path = CRD_DIR) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if a file differs from the models")
    args = parser.parse_args(argv)
    stale = []
    for name, crd in crds().items():
        path = crd_dir / name
        text = render(crd)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path)
            continue
        crd_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    for path in stale:
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"{shown} is out of date: run python hack/gen_crds.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
