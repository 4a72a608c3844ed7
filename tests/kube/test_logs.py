"""Structured log fields never collide with the attributes logging keeps for itself.

``logger.info(msg, extra={"created": n})`` raises ``KeyError`` inside ``makeRecord`` as soon
as INFO is enabled, because ``created`` is a ``LogRecord`` attribute: the controller once
failed every reconcile after applying its plan that way. This scans every ``extra={...}``
in the package, so the whole class of mistake is caught wherever it is made.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import trainctl
from trainctl.kube.structured_logging import JSONFormatter, TextFormatter

RESERVED = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


def extra_keys() -> list[tuple[str, int, str]]:
    found = []
    # Every portion of the namespace package: the root's, api/'s and controller/'s.
    roots = {Path(portion).resolve() for portion in trainctl.__path__}
    for root, path in sorted((portion, path) for portion in roots for path in portion.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
                    for key in keyword.value.keys:
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            found.append((str(path.relative_to(root.parent)), node.lineno, key.value))
    return found


def test_no_log_call_passes_a_reserved_field():
    keys = extra_keys()
    assert len(keys) > 10, "the scan found no log calls: it is looking in the wrong place"
    clashes = [f"{path}:{line}: {key}" for path, line, key in keys if key in RESERVED]
    assert clashes == []


def test_formatters_print_the_extra_fields():
    logger = logging.getLogger("trainctl.test")
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "applied plan", None, None,
                               extra={"job": "default/mnist", "creates": 3})
    assert TextFormatter().format(record).endswith("applied plan job=default/mnist creates=3")
    assert '"creates": 3' in JSONFormatter().format(record)
