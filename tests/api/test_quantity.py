"""The one quantity parser, against apimachinery's grammar: what parses to what, what is
refused with the API server's message, and the rounding of the milli and byte helpers."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from trainctl.api.quantity import QUANTITY_MESSAGE, QUANTITY_PATTERN, milli_value, parse_quantity, to_bytes


@pytest.mark.parametrize(("text", "value"), [
    ("100m", "0.1"), ("1", "1"), ("1.5", "1.5"), (".5", "0.5"), ("5.", "5"), ("2Ki", "2048"), ("1Gi", str(2**30)),
    ("1.5Gi", str(3 * 2**29)), ("1e3", "1000"), ("5E-1", "0.5"), ("+1", "1"), ("+1k", "1000"), ("-1", "-1"),
    ("250u", "0.00025"), ("3n", "0.000000003"), ("2M", "2000000"), ("1Ei", str(2**60)), ("0", "0"),
    (2, "2"), (0.5, "0.5"), (Decimal("1.25"), "1.25"),
])
def test_quantities_in_kubernetes_grammar_parse(text: Any, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize("text", ["lots", "", "1.2.3", "1Gii", "1ki", "1K", "Mi", "1 Gi", " 1", "1Gib", "--1",
                                  "1e", "e3", "inf", "nan", "1_000", "1e999999999", True, None, [1], {"cpu": 1},
                                  float("inf"), float("nan")])
def test_anything_else_is_refused_with_the_api_servers_message(text: Any) -> None:
    with pytest.raises(ValueError) as refused:
        parse_quantity(text)
    assert str(refused.value) == QUANTITY_MESSAGE
    assert QUANTITY_PATTERN in QUANTITY_MESSAGE


def test_the_quoted_pattern_is_the_one_kube_quotes_and_admits_every_quantity() -> None:
    assert QUANTITY_PATTERN == r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
    for text in ("100m", "1.5Gi", "1e3", "+1", ".5"):
        assert re.fullmatch(QUANTITY_PATTERN, text)


@pytest.mark.parametrize(("text", "milli"), [("0.5", 500), ("1", 1000), ("1u", 1), ("100m", 100), ("1.0001", 1001),
                                             (2, 2000)])
def test_milli_value_rounds_up_as_kube_does(text: Any, milli: int) -> None:
    assert milli_value(text) == milli


@pytest.mark.parametrize(("text", "size"), [("1Ki", 1024), ("512Mi", 512 * 2**20), ("1G", 10**9), ("1.5", 2),
                                            ("100m", 1), (1048576, 1048576)])
def test_to_bytes_rounds_up_to_whole_bytes(text: Any, size: int) -> None:
    assert to_bytes(text) == size


def test_the_helpers_refuse_what_the_parser_refuses() -> None:
    for helper in (milli_value, to_bytes):
        with pytest.raises(ValueError):
            helper("lots")
