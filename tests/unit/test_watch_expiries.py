"""Spotting kopf's record of an expired watch (410 Gone), the only trace kopf leaves of one."""

from __future__ import annotations

import logging

import pytest

from lws_operator.controllers.runtime import (
    KOPF_WATCH_LOGGER,
    WatchExpiries,
    kopf_resource_name,
)


def test_resource_names_match_kopfs() -> None:
    from kopf._cogs.structs.references import Resource

    assert kopf_resource_name("apps", "v1", "statefulsets") == str(
        Resource(group="apps", version="v1", plural="statefulsets"))
    assert kopf_resource_name("", "v1", "pods") == str(
        Resource(group="", version="v1", plural="pods"))


def test_expiries_are_reported_and_debug_records_stay_out(
        caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    logger = logging.getLogger(KOPF_WATCH_LOGGER)
    spotter = WatchExpiries.install(seen.append)
    try:
        with caplog.at_level(logging.INFO, logger=KOPF_WATCH_LOGGER):
            logger.setLevel(logging.DEBUG)  # caplog.at_level set it back to INFO
            logger.debug("Restarting the watch-stream for %s %s.", "pods.v1", "cluster-wide")
            logger.debug("Watch-stream for pods.v1 cluster-wide is inactive, reconnecting.")
            logger.warning("something kopf warns about")
    finally:
        spotter.uninstall()
    assert seen == ["pods.v1"]
    assert [r.getMessage() for r in caplog.records] == ["something kopf warns about"]
    assert logger.level == logging.NOTSET


def test_kopf_still_logs_the_expiry_this_way() -> None:
    """The spotter depends on kopf's wording: a kopf upgrade that changes it fails here."""
    import inspect

    from kopf._cogs.clients import watching

    source = inspect.getsource(watching.continuous_watch)
    assert 'logger.debug(f"Restarting the watch-stream for {resource} {where}.")' in source
    assert "== 410" in source
