"""How a streamed answer (a watch) is cut into lines (``kube.client.lines_of``): whatever the
chunks the connection delivers, every line comes whole and once, however long (aiohttp's own
``readline`` refuses a line over 128 KiB, and a watch event of a ControllerRevision can hold
more), and an unterminated last line is not lost."""

from __future__ import annotations

import pytest

from lws_operator.kube.client import lines_of


class Chunks:
    """A body delivered in the given pieces, one per read (as a socket delivers it)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)
        self.sizes: list[int] = []

    async def read(self, n: int = -1) -> bytes:
        self.sizes.append(n)
        return self.pieces.pop(0) if self.pieces else b""


async def lines(pieces: list[bytes]) -> list[bytes]:
    return [line async for line in lines_of(Chunks(pieces))]


@pytest.mark.parametrize(("pieces", "expected"), [
    ([b"a\nb\n"], [b"a", b"b"]),
    ([b"a", b"b\nc", b"\n"], [b"ab", b"c"]),
    ([b"a\n", b"", b"b\n"], [b"a"]),  # an empty read is the end of the body
    ([b"a\nb"], [b"a", b"b"]),  # the last line without its newline
    ([b"\n", b"a\n\n"], [b"", b"a", b""]),  # blank lines are the reader's to skip
    ([b"x" * 100_000, b"x" * 100_000, b"x" * 100_000 + b"\ny\n"], [b"x" * 300_000, b"y"]),
], ids=["one chunk", "split lines", "empty read ends", "unterminated", "blank lines",
        "longer than aiohttp's line limit"])
async def test_lines_come_whole_whatever_the_chunks(pieces: list[bytes],
                                                    expected: list[bytes]) -> None:
    assert await lines(pieces) == expected
