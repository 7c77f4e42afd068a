"""Names and system labels of a DisaggregatedSet's children (upstream's naming, the LWS docs'
Labels table)."""

from __future__ import annotations

import pytest

from lws_operator.logic.disaggregated.names import (
    app_label,
    legacy_lws_name,
    lws_name,
    scaler_name,
    service_name,
    service_name_length,
    system_labels,
)


def test_child_names() -> None:
    assert lws_name("my-ds", 0, "abc12345", "prefill") == "my-ds-0-abc12345-prefill"
    assert lws_name("my-ds", 12, "abc12345", "decode") == "my-ds-12-abc12345-decode"
    assert legacy_lws_name("my-ds", "abc12345", "prefill") == "my-ds-abc12345-prefill"
    assert service_name("my-app-0-ef53f2d7-prefill") == "my-app-0-ef53f2d7-prefill-prv"
    # A legacy child's Service keeps the legacy form.
    assert service_name(legacy_lws_name("d", "r1234567", "x")) == "d-r1234567-x-prv"
    assert scaler_name("myds", "prefill") == "myds-prefill"
    assert app_label("my-ds", 1, "decode") == "my-ds-1-decode"


def test_system_labels() -> None:
    assert system_labels("disaggregatedset-sample", 0, "a1b2c3d4", "prefill") == {
        "app": "disaggregatedset-sample-0-prefill",
        "disaggregatedset.x-k8s.io/name": "disaggregatedset-sample",
        "disaggregatedset.x-k8s.io/role": "prefill",
        "disaggregatedset.x-k8s.io/slice": "0",
        "disaggregatedset.x-k8s.io/revision": "a1b2c3d4",
    }


@pytest.mark.parametrize(("ds_len", "role_len", "slices", "length"), [
    (40, 7, 1, 63),     # the longest accepted with one slice
    (40, 8, 1, 64),
    (50, 3, 1, 69),
    (40, 7, 100, 64),   # slice 99 adds a digit
    (40, 7, 10, 63),    # slices 0..9: one digit
    (39, 7, 11, 63),
])
def test_service_name_length(ds_len: int, role_len: int, slices: int, length: int) -> None:
    assert service_name_length("d" * ds_len, "r" * role_len, slices) == length
