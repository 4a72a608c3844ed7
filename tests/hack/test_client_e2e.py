"""``hack/client_e2e.py``: the suite is found where a developer may point, and pytest's report
becomes one row per test with the reason of each failure. (Running the suite itself needs
the client's repository; docs/compatibility.md has its results.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "client_e2e.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("client_e2e", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["client_e2e"] = module
    spec.loader.exec_module(module)
    return module


def test_the_report_becomes_a_row_per_test_with_its_reason(script: ModuleType, tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
        '<testcase classname="e2e_test.test_client.TestClient" name="test_node_apis" time="0.1"/>'
        '<testcase classname="e2e_test.test_client.TestClient" name="test_pod_apis" time="3">'
        "<failure message=\"AssertionError: 'test string 1' != None\">long traceback</failure></testcase>"
        '<testcase classname="e2e_test.test_client.TestClient" name="test_portforward_http" time="180">'
        '<failure message="Failed: Timeout (&gt;180.0s) from pytest-timeout.">...</failure></testcase>'
        '<testcase classname="e2e_test.test_apps.TestClientApps" name="test_setup" time="0">'
        '<error message="failed on setup with &quot;SkipTest&quot;&#10;second line">...</error></testcase>'
        "</testsuite></testsuites>")
    assert [tuple(row) for row in script.outcomes(report)] == [
        ("TestClient.test_node_apis", "pass", ""),
        ("TestClient.test_pod_apis", "FAIL", "AssertionError: 'test string 1' != None"),
        ("TestClient.test_portforward_http", "FAIL", "Failed: Timeout (>180.0s) from pytest-timeout."),
        ("TestClientApps.test_setup", "ERROR", 'failed on setup with "SkipTest"'),
    ]


def test_the_suite_is_found_in_a_checkout_or_as_its_directory(script: ModuleType, tmp_path: Path) -> None:
    suite = tmp_path / "python" / "kubernetes" / "e2e_test"
    suite.mkdir(parents=True)
    (suite / "base.py").write_text("")
    assert script.suite_source(str(tmp_path / "python"), tmp_path) == suite
    assert script.suite_source(str(suite), tmp_path) == suite
    with pytest.raises(SystemExit):
        script.suite_source(str(tmp_path), tmp_path)
