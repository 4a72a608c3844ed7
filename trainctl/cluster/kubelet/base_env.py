"""The environment a container starts from, before its spec's: a clean base, not the shell's.

A kubelet gives a container its image's environment and its spec's, never its own; the local
kubelet runs no images, and its own environment is that of the shell that ran
``trainctl local up`` (``VIRTUAL_ENV``, ``PS1``, ``PIP_*``, ``OLDPWD``, the user's ``HOME``),
which no pod should see. So every container starts from this base:

- ``PATH``: the directory of the Python that runs the cluster (so ``python``, ``python3``,
  ``torchrun`` are the cluster's, with torch and MindSpore), then the system directories;
- ``HOME``: a directory of the pod's own, writable, removed with the pod;
- ``PYTHONUNBUFFERED=1``, as the samples' image sets it: a container's log is a file read
  while it runs (``kubectl logs -f``), and a Python writing to a file buffers its prints
  until it exits otherwise;
- the few variables this machine's libraries need to run at all (:data:`PASSED_THROUGH`),
  only where they are set.

The kubelet adds what the cluster itself provides (``HOSTNAME``, the Service-name resolver's
``PYTHONPATH``, ``KUBERNETES_SERVICE_HOST``/``PORT``, device variables), then the spec's env.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Where set for the kubelet, passed to every container: the locale and time zone, the
# machine's library path, and OpenBLAS's CPU settings (a machine whose CPU OpenBLAS
# misdetects sets them; without them numpy, torch and MindSpore can crash or run slowly).
HOME_DIRECTORY = "home"  # DIR/pods/<uid>/home: the pod's HOME
PASSED_THROUGH = ("LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def base_environment(machine: Mapping[str, str], interpreter_dir: str, home: str) -> dict[str, str]:
    """The base of every container's environment: ``machine`` is the kubelet's own, of which
    only :data:`PASSED_THROUGH` is kept; ``interpreter_dir`` goes first on ``PATH``."""
    env = {name: machine[name] for name in PASSED_THROUGH if name in machine}
    env["PATH"] = os.pathsep.join([interpreter_dir, *(d for d in SYSTEM_PATH if d != interpreter_dir)])
    env["HOME"] = home
    env["PYTHONUNBUFFERED"] = "1"
    return env
