"""Kubernetes resource quantities, compared by value.

The API server stores every quantity of a typed object (a StatefulSet's or Deployment's pod
template, its claim templates) in canonical form: ``4`` becomes ``"4"``, ``"1000m"`` ``"1"``,
``0.5`` ``"500m"``, ``"1024Mi"`` ``"1Gi"``. The objects the controller builds carry the values
exactly as the user wrote them in the LeaderWorkerSet, a custom resource the server stores as
written. Compared as text, desired and live never matched for such a template, and every pass
applied the leader StatefulSet again for nothing (found running upstream's TPU sample, with
``google.com/tpu: 4``). So the fields that hold quantities are compared by value.

Parsing follows apimachinery's ``ParseQuantity``: a signed decimal number (``1``, ``1.5``,
``.5``, ``5.``) with an optional suffix, binary SI (``Ki`` .. ``Ei``, powers of 1024), decimal
SI (``n``, ``u``, ``m``, none, ``k``, ``M``, ``G``, ``T``, ``P``, ``E``) or a decimal exponent
(``e3``, ``E-2``, ``e+6``); a JSON number is read as its text. The server rounds a value that is
not a whole number of nano units away from zero to the next one (``0.5n`` is stored as ``1n``)
and caps binary-SI values at 2^63-1; the core API's defaulting then rounds every entry of a
resource list (container and pod resources, overhead, claim requests) up to a whole milli unit
(``0.5n`` is stored there as ``1m``, ``1.0000000001`` as ``1001m``), while single quantities
(``emptyDir.sizeLimit``) keep nano units. All of it is reproduced here, measured against the
real API server (tests/integration/test_quantity_canonical.py): a value compared unrounded would
differ from its stored form forever. The server keeps the text as written when it already is
exact and minimal in its own format (``5.``, ``+2``, ``1E3`` stay), so stored text is not a
canonical form to compare with either: only values are.

Why not ``kubernetes.utils.parse_quantity``: the pure layers may not import the Kubernetes
client (the import-linter contract), and it is looser and less exact than the server: it accepts
text the server refuses (``1K``, ``NaN``, ``Infinity``, ``1_000``) and does not round below a
nano unit, so ``0.5n`` against the stored ``1n`` would still be a write on every pass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Final

_QUANTITY: Final = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?:[eE](?P<exponent>[+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?"
)
_SUFFIXES: Final[dict[str, Fraction]] = {
    "": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
NANO: Final = Fraction(1, 10**9)
MILLI: Final = Fraction(1, 10**3)
# The largest binary-SI value the server keeps (larger ones are stored as this).
_MAX_BINARY: Final = Fraction(2**63 - 1)
# Exponents beyond this are left unparsed (compared as text): Go reads them into an int32 and
# wraps, which no template means; computing 10**huge exactly would only burn memory.
_MAX_EXPONENT: Final = 1000


def _quantity_text(value: Any) -> str | None:
    """The text the server parses for ``value``: a string as it is, a JSON number as JSON
    writes it; None for anything else (a boolean, a non-finite float, an object)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # What json.dumps writes, and so what the server parses.
        return repr(value) if math.isfinite(value) else None
    return value if isinstance(value, str) else None


def _factor(exponent: str | None, suffix: str) -> Fraction | None:
    """What the number is multiplied by: ``10**exponent``, or the suffix's factor; None for an
    exponent left unparsed."""
    if exponent is None:
        return _SUFFIXES[suffix]
    if len(exponent) > 6:  # int() of thousands of digits raises
        return None
    value = int(exponent)
    return None if abs(value) > _MAX_EXPONENT else Fraction(10) ** value


def parse_quantity(value: Any, unit: Fraction = NANO) -> Fraction | None:
    """The exact value the API server stores for ``value`` (a quantity string, or a JSON
    number) in a field whose smallest unit is ``unit`` (``MILLI`` in resource lists), or None
    when it is not a quantity the server would accept."""
    text = _quantity_text(value)
    match = _QUANTITY.fullmatch(text) if text is not None else None
    if match is None:
        return None
    whole, fraction = match["whole"], match["fraction"] or ""
    if not whole and not fraction:
        return None
    suffix = match["suffix"] or ""
    factor = _factor(match["exponent"], suffix)
    if factor is None:
        return None
    amount = Fraction(int((whole or "0") + fraction), 10 ** len(fraction)) * factor
    amount = math.ceil(amount / NANO) * NANO  # away from zero: the sign comes last
    if suffix.endswith("i"):
        amount = min(amount, _MAX_BINARY)
    amount = math.ceil(amount / unit) * unit
    return -amount if match["sign"] == "-" else amount


def same_quantity(desired: Any, live: Any, unit: Fraction = NANO) -> bool:
    """Whether ``live`` holds the value ``desired`` asks for in a field whose smallest unit is
    ``unit``; text comparison for anything that is not a quantity (the server would have
    refused it, so it can only be equal)."""
    if desired == live:
        return True
    wanted, held = parse_quantity(desired, unit), parse_quantity(live, unit)
    return wanted is not None and wanted == held


def quantity_unit(keys: Sequence[str]) -> Fraction | None:
    """The smallest unit the server keeps in the field at ``keys`` (the map keys from the
    object's root, list positions left out) of a StatefulSet or Deployment, or None when it
    holds no quantity. ``MILLI`` for an entry of a resource list: a ``resources.limits`` or
    ``resources.requests`` map (containers and init containers, pod-level resources, claim
    templates and ephemeral volumes) or a pod's ``overhead``; ``NANO`` for an
    ``emptyDir.sizeLimit`` or a ``resourceFieldRef.divisor`` (downward API env vars and
    volumes). These names mean nothing else anywhere in those objects."""
    if len(keys) >= 3 and keys[-3] == "resources" and keys[-2] in ("limits", "requests"):
        return MILLI
    if len(keys) >= 2 and keys[-2] == "overhead":
        return MILLI
    if tuple(keys[-2:]) in (("emptyDir", "sizeLimit"), ("resourceFieldRef", "divisor")):
        return NANO
    return None
