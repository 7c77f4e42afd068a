"""kopf's ``OS signals are ignored`` warning is dropped only where it is false: from the thread
kopf runs in, which gets the process's SIGTERM/SIGINT through its ``stop_flag``
(``kube.signal_watch.SignalsForwarded``). Every other record passes."""

from __future__ import annotations

import inspect
import logging
import threading

import pytest

from lws_operator.kube.signal_watch import (
    KOPF_RUNNING_LOGGER,
    KOPF_SIGNALS_IGNORED,
    SignalsForwarded,
)


def test_the_dropped_text_is_what_kopf_logs_outside_the_main_thread() -> None:
    from kopf._core.reactor import running

    assert running.logger.name == KOPF_RUNNING_LOGGER
    assert f'logger.warning("{KOPF_SIGNALS_IGNORED}.")' in inspect.getsource(running)


def test_only_that_warning_of_the_kopf_thread_is_dropped(
        caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger(KOPF_RUNNING_LOGGER)
    seen: list[str] = []

    def kopf_thread() -> None:
        forwarded = SignalsForwarded.install()
        try:
            logger.warning(KOPF_SIGNALS_IGNORED + ".")
            logger.warning("Root tasks are not stopped.")  # any other kopf warning
        finally:
            forwarded.uninstall()
        seen.append("ran")

    with caplog.at_level(logging.INFO, KOPF_RUNNING_LOGGER):
        thread = threading.Thread(target=kopf_thread)
        thread.start()
        thread.join()
        # Another thread's record of the same text (while installed, and after) passes.
        forwarded = SignalsForwarded(thread.ident or 0)
        logger.addFilter(forwarded)
        try:
            logger.warning(KOPF_SIGNALS_IGNORED + ".")
        finally:
            logger.removeFilter(forwarded)
    assert seen == ["ran"]
    assert [r.getMessage() for r in caplog.records] == [
        "Root tasks are not stopped.", KOPF_SIGNALS_IGNORED + "."]
    assert not logger.filters

