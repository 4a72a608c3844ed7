"""Kubernetes resource quantities ("500m", "1.5Gi", "1e3"): one parser for every component.

Pure and stdlib only, so the API package installs without the Kubernetes client. The grammar
is apimachinery's ``resource.Quantity``: a signed decimal number, then at most one suffix,
binary (``Ki`` ... ``Ei``), decimal SI (``n u m k M G T P E``) or a decimal exponent
(``e3``, ``E-1``). Text outside it raises ValueError with the message the API server gives
(:data:`QUANTITY_MESSAGE`); what a bad quantity means (an error, zero, "unknown") is each
caller's choice, made where it calls.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Union

# The expression apimachinery quotes when it rejects a quantity (its splitREString).
QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_MESSAGE = f"quantities must match the regular expression '{QUANTITY_PATTERN}'"

_GRAMMAR = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?")
_SUFFIX_FACTORS = {"": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
                   "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
                   "P": Decimal("1e15"), "E": Decimal("1e18"), "Ki": Decimal(2**10), "Mi": Decimal(2**20),
                   "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60)}

QuantityValue = Union[str, int, float, Decimal]


def parse_quantity(value: Any) -> Decimal:
    """The value of a quantity: text in the grammar, or a JSON number. Raises ValueError
    (with the API server's message) for anything else, booleans and None included."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float, Decimal)):
        raise ValueError(QUANTITY_MESSAGE)
    if isinstance(value, str):
        return _parse_text(value)
    number = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    if not number.is_finite():
        raise ValueError(QUANTITY_MESSAGE)
    return number


@functools.lru_cache(maxsize=4096)  # a cluster uses few distinct quantities ("500m", "1Gi"), read often
def _parse_text(text: str) -> Decimal:
    match = _GRAMMAR.fullmatch(text)
    if match is None:
        raise ValueError(QUANTITY_MESSAGE)
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix in _SUFFIX_FACTORS:  # "E" and "Ei" are suffixes, "E3" an exponent
            return Decimal(number) * _SUFFIX_FACTORS[suffix]
        return Decimal(number).scaleb(int(suffix[1:]))
    except (InvalidOperation, ArithmeticError):  # an exponent beyond what a Decimal holds
        raise ValueError(QUANTITY_MESSAGE) from None


def milli_value(value: Any) -> int:
    """The quantity in thousandths, rounded up as apimachinery's ``MilliValue`` does (a CPU
    quantity in millicores: "0.5" is 500, "1u" is 1). Raises ValueError as :func:`parse_quantity`."""
    return math.ceil(parse_quantity(value) * 1000)


def to_bytes(value: Any) -> int:
    """A memory quantity in bytes, rounded up as apimachinery's ``Value`` does ("1Ki" is 1024,
    "1.5" is 2). Raises ValueError as :func:`parse_quantity`."""
    return math.ceil(parse_quantity(value))
