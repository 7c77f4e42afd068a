"""Quantities as a template may write them and as the API server stores them, shared by the
unit tests of ``logic.objects.quantity`` and the api-tier test that checks every pair against a real
kube-apiserver (tests/integration/test_quantity_canonical.py, where these were measured).

The stored text is not always canonical: the server keeps text that is already exact and
minimal in its own format (``5.``, ``+2``, ``1E3``, ``000100m``), so only values compare.
"""

from __future__ import annotations

from typing import Any

# In a resource list (a container's requests here): rounded up to whole milli units.
IN_RESOURCE_LIST: list[tuple[Any, str]] = [
    (4, "4"),
    (125, "125"),
    ("4", "4"),
    ("1000m", "1"),
    ("1500m", "1500m"),
    (0.5, "500m"),
    ("0.5", "500m"),
    (".5", "500m"),
    ("5.", "5."),
    ("+2", "+2"),
    ("1024Mi", "1Gi"),
    ("1Gi", "1Gi"),
    ("0.5Gi", "512Mi"),
    ("1.5Gi", "1536Mi"),
    ("1536Mi", "1536Mi"),
    ("2048Ki", "2Mi"),
    ("1.1Ki", "1126400m"),
    ("0.001Ki", "1024m"),
    ("1073741824", "1073741824"),
    ("1k", "1k"),
    ("1000", "1k"),
    ("1000000", "1M"),
    ("1e3", "1e3"),
    ("1E3", "1E3"),
    ("1e+3", "1e+3"),
    ("1.5e3", "1500"),
    ("100e-3", "100e-3"),
    ("0.1m", "1m"),
    ("0.5n", "1m"),
    ("1e-12", "1e-3"),
    ("1.0000000001", "1001m"),
    ("1E", "1E"),
    ("1Ei", "1Ei"),
    ("16Ei", "9223372036854775807"),
    ("12345678901234567890", "12345678901234567890"),
    (1e9, "1G"),
    ("0", "0"),
    ("0.0", "0"),
    ("000100m", "000100m"),
]

# A single quantity (an emptyDir's sizeLimit here): nano units are kept.
SINGLE: list[tuple[Any, str]] = [
    ("0.5n", "1n"),
    ("1.0000000001", "1000000001n"),
    ("1e-12", "1e-9"),
    ("0.1m", "100u"),
    ("1024Mi", "1Gi"),
    ("5.", "5."),
    (1e9, "1G"),
    ("16Ei", "9223372036854775807"),
    ("1.1Ki", "1126400m"),
]
