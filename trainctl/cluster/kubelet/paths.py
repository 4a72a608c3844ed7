"""Paths built from names in pod specs, kept inside the kubelet's directories.

A container name or pod uid comes from the API, and the API may hold anything (old data,
a server without validation). Every file the kubelet writes for a pod is named through
:func:`inside`, which refuses a name that is not one plain path component and checks the
resolved result is still under the base directory.
"""

from __future__ import annotations

import os
from pathlib import Path


class OutsideDirectory(ValueError):
    """A name would lead out of the directory it must stay in."""


def inside(base: Path, *names: str) -> Path:
    """``base/names[0]/names[1]/...``, provided each name is one plain component and the
    resolved path lies under ``base``."""
    for name in names:
        if (not isinstance(name, str) or name in ("", ".", "..") or "\0" in name
                or os.sep in name or (os.altsep and os.altsep in name)):
            raise OutsideDirectory(f"{name!r} is not a plain file name")
    root = base.resolve()
    path = root.joinpath(*names).resolve()
    if root not in path.parents:
        raise OutsideDirectory(f"{path} is not inside {root}")
    return path
