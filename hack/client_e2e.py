"""Run the official Kubernetes Python client's own e2e suite against a throwaway embedded cluster.

    .venv/bin/python hack/client_e2e.py [--tests DIR] [--nodes 2] [-k EXPR] [--keep] [--sandbox M] [--network M]

The suite (``kubernetes/e2e_test`` in kubernetes-client/python) is the client's, not this
project's: it is not in the client's wheel, so it is taken from ``--tests`` (a checkout of
kubernetes-client/python, or its ``kubernetes/e2e_test`` directory) or else cloned at the tag
of the installed client (``v30.1.0`` for kubernetes 30.1.0). It is copied into a temporary
directory and never into the project.

Then ``trainctl local up --nodes 2 --detach`` starts a cluster in that directory, the suite
runs under pytest with ``KUBECONFIG`` pointing at it (the suite's ``base.py`` loads the
kubeconfig ``KUBECONFIG`` names), the cluster is brought down, and one line per test says
passed or failed and why. The exit status is pytest's. docs/compatibility.md lists the tests
that fail here and the reasons ("The Python client's e2e suite").
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import NamedTuple

REPOSITORY = "https://github.com/kubernetes-client/python"
SUITE = Path("kubernetes") / "e2e_test"

# The suite imports itself as ``kubernetes.e2e_test``: its directory joins the installed
# client's package path before pytest starts, in pytest's own process.
BOOT = """
import sys, kubernetes, pytest
kubernetes.__path__.append(sys.argv[1])
sys.exit(pytest.main(sys.argv[2:]))
"""


class Outcome(NamedTuple):
    test: str
    result: str
    reason: str


def suite_source(given: str | None, scratch: Path) -> Path:
    """The ``e2e_test`` directory: the one given, or one cloned at the installed client's tag."""
    if given:
        path = Path(given).expanduser().resolve()
        for candidate in (path / SUITE, path):
            if (candidate / "base.py").is_file():
                return candidate
        sys.exit(f"{given}: neither a kubernetes-client/python checkout nor its kubernetes/e2e_test")
    tag = "v" + importlib.metadata.version("kubernetes")
    checkout = scratch / "client"
    print(f"cloning {REPOSITORY} at {tag}", flush=True)
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--branch", tag, REPOSITORY, str(checkout)], check=True)
    return checkout / SUITE


def outcomes(report: Path) -> list[Outcome]:
    """One row per test case of pytest's JUnit XML report."""
    rows = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        test = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}"
        result, reason = "pass", ""
        for tag, word in (("failure", "FAIL"), ("error", "ERROR"), ("skipped", "skip")):
            found = case.find(tag)
            if found is not None:
                result, reason = word, _first_line(found.get("message") or found.text or "")
                break
        rows.append(Outcome(test, result, reason))
    return rows


def _first_line(message: str) -> str:
    line = next((text.strip() for text in message.splitlines() if text.strip()), "")
    return line if len(line) <= 160 else line[:157] + "..."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", metavar="DIR", help="a kubernetes-client/python checkout (or its kubernetes/e2e_test); "
                                                       "default: clone it at the installed client's tag")
    parser.add_argument("--nodes", type=int, default=2, help="nodes of the cluster (default 2)")
    parser.add_argument("--sandbox", choices=("auto", "bwrap", "none"), help="the pods' sandbox (local up's --sandbox)")
    parser.add_argument("--network", choices=("isolated", "shared", "auto"), help="the pod network (local up's --network)")
    parser.add_argument("-k", dest="select", metavar="EXPR", help="run only the tests pytest's -k EXPR selects")
    parser.add_argument("--timeout", type=int, default=180, metavar="S",
                        help="fail a test still running after S seconds (default 180; some wait for ever)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (cluster logs, report)")
    options = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="client-e2e-"))
    cluster = scratch / "cluster"
    trainctl = [sys.executable, "-m", "trainctl.cli.main", "local"]
    try:
        suite_root = scratch / "suite"
        shutil.copytree(suite_source(options.tests, scratch), suite_root / SUITE)
        (suite_root / "pytest.ini").write_text("[pytest]\n")  # none of the project's pytest settings
        up = ["up", "--dir", str(cluster), "--nodes", str(options.nodes), "--no-controller", "--detach"]
        for flag in ("sandbox", "network"):
            if getattr(options, flag):
                up += [f"--{flag}", getattr(options, flag)]
        subprocess.run(trainctl + up, check=True)
        report = scratch / "report.xml"
        pytest_args = [str(suite_root / SUITE), "--rootdir", str(suite_root), "-c", str(suite_root / "pytest.ini"),
                       "-p", "no:cacheprovider", "-v", "--timeout", str(options.timeout), "--junitxml", str(report)]
        if options.select:
            pytest_args += ["-k", options.select]
        env = {**os.environ, "KUBECONFIG": str(cluster / "kubeconfig")}
        code = subprocess.run([sys.executable, "-c", BOOT, str(suite_root / "kubernetes"), *pytest_args],
                              cwd=suite_root, env=env).returncode
        rows = outcomes(report) if report.exists() else []
    finally:
        if cluster.exists():
            subprocess.run(trainctl + ["down", "--dir", str(cluster)], check=False)
        if options.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    width = max((len(row.test) for row in rows), default=4)
    print(f"\n{'test':<{width}}  result  reason")
    for row in rows:
        print(f"{row.test:<{width}}  {row.result:<6}  {row.reason}")
    passed = sum(row.result == "pass" for row in rows)
    print(f"\n{passed} of {len(rows)} passed")
    return code


if __name__ == "__main__":
    sys.exit(main())
