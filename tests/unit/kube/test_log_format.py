"""Log lines (``__main__`` formatters with kube.logcontext): JSON with the LeaderWorkerSet and
group a reconcile pass is about, bound per asyncio task."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from lws_operator.__main__ import _JsonFormatter, _log_level, _TextFormatter
from lws_operator.kube.logcontext import ContextFilter, bind_group, reconciling


class _Capture(logging.Handler):
    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.addFilter(ContextFilter())
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def capture() -> tuple[logging.Logger, _Capture]:
    logger = logging.getLogger("test.logformat")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = _Capture(_JsonFormatter())
    logger.handlers = [handler]
    return logger, handler


def test_lines_outside_a_pass_have_no_context(capture: tuple[logging.Logger, _Capture]) -> None:
    logger, handler = capture
    logger.info("hello %s", "world")
    entry = json.loads(handler.lines[0])
    assert set(entry) == {"ts", "level", "logger", "msg"}
    assert (entry["level"], entry["logger"], entry["msg"]) == ("info", "test.logformat",
                                                               "hello world")
    assert entry["ts"].endswith("+00:00")


def test_a_pass_and_a_group(capture: tuple[logging.Logger, _Capture]) -> None:
    logger, handler = capture
    with reconciling(("ns", "my-lws")):
        logger.info("pass")
        bind_group("3")
        logger.warning("group work")
        bind_group(None)
        logger.info("back to the set")
    logger.info("after")
    entries = [json.loads(line) for line in handler.lines]
    assert [(e.get("lws"), e.get("group")) for e in entries] == [
        ("ns/my-lws", None), ("ns/my-lws", "3"), ("ns/my-lws", None), (None, None)]


def test_a_group_bound_in_a_pass_ends_with_it(capture: tuple[logging.Logger, _Capture]) -> None:
    logger, handler = capture
    with reconciling(("ns", "a")):
        bind_group(0)
    logger.info("after")
    assert "group" not in json.loads(handler.lines[0])


async def test_concurrent_passes_keep_their_own_context(
        capture: tuple[logging.Logger, _Capture]) -> None:
    logger, handler = capture

    async def one(name: str, group: int) -> None:
        with reconciling(("ns", name)):
            bind_group(group)
            for _ in range(3):
                await asyncio.sleep(0)
                logger.info(name)

    await asyncio.gather(one("a", 1), one("b", 2))
    for line in handler.lines:
        entry = json.loads(line)
        assert entry["lws"] == f"ns/{entry['msg']}"
        assert entry["group"] == {"a": "1", "b": "2"}[entry["msg"]]


def test_explicit_extra_wins_and_errors_are_included(
        capture: tuple[logging.Logger, _Capture]) -> None:
    logger, handler = capture
    with reconciling(("ns", "a")):
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("failed", extra={"lws": "other/b"})
    entry = json.loads(handler.lines[0])
    assert entry["lws"] == "other/b"
    assert "ValueError: boom" in entry["error"]


def test_text_format_appends_the_context() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "msg", None, None)
    record.lws, record.group = "ns/a", "2"
    assert _TextFormatter().format(record).endswith("x: msg [lws=ns/a group=2]")
    plain = logging.LogRecord("x", logging.INFO, __file__, 1, "msg", None, None)
    assert _TextFormatter().format(plain).endswith("x: msg")


@pytest.mark.parametrize(("zap", "expected"), [
    (None, "info"), ("2", "debug"), ("0", "info"), ("debug", "debug"), ("error", "error"),
    ("warn", "warning"),
])
def test_zap_log_levels(zap: str | None, expected: str) -> None:
    assert _log_level("info", zap) == expected
