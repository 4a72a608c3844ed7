#!/usr/bin/env python3
"""Wrap the lines ruff reports as too long (E501) by formatting only the statements around them.

    python hack/wrap_long_lines.py tests e2e hack samples

The code is not kept in ruff's formatter style as a whole; this touches nothing but the
statements that hold a too-long line, so a diff shows only what the line limit needed.
Long string literals are left for a person to split.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys


def main(paths: list[str]) -> int:
    report = subprocess.run(["ruff", "check", "--select", "E501", "--output-format", "json", *paths],
                            capture_output=True, text=True, check=False)
    rows: dict[str, set[int]] = collections.defaultdict(set)
    for finding in json.loads(report.stdout or "[]"):
        rows[finding["filename"]].add(finding["location"]["row"])
    for filename, lines in sorted(rows.items()):
        for row in sorted(lines, reverse=True):  # bottom up: a wrap shifts the rows below it
            subprocess.run(["ruff", "format", "--range", f"{row}:1-{row + 1}:1", filename], check=True)
    return subprocess.run(["ruff", "check", "--select", "E501", *paths], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["."]))
