"""What every subcommand prints the same way: ``-o json|yaml`` data, colour, confirmation.

Colour follows the usual convention: only when the stream is a terminal and ``NO_COLOR`` is
unset or empty (no-color.org), so piped output and logs stay plain. A confirmation is asked on
the terminal; with stdin not a terminal (a script, CI) an action refuses unless ``--yes`` was
given, rather than reading an answer from whatever is piped in.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

import yaml

FORMATS = ("json", "yaml")


def add_output_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=FORMATS,
                        help="print the model as data instead of the table or tree")


def dump(data: Any, fmt: str) -> str:
    """``data`` as JSON (indented, like kubectl) or YAML, ending in a newline."""
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def colour_enabled(stream: TextIO, env: dict[str, str] | None = None) -> bool:
    """Whether to colour ``stream``: a terminal, and ``NO_COLOR`` unset or empty."""
    environ = os.environ if env is None else env
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not environ.get("NO_COLOR")


_CODES = {"green": "32", "yellow": "33", "red": "31", "blue": "34", "magenta": "35",
          "dim": "2", "bold": "1", "cyan": "36"}


class Paint:
    """ANSI colour when ``enabled``, plain text otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        if not self.enabled or not style:
            return text
        return f"\x1b[{_CODES[style]}m{text}\x1b[0m"


def add_yes_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-y", "--yes", action="store_true",
                        help="do not ask for confirmation (required when stdin is not a "
                        "terminal)")


class NotConfirmed(Exception):
    """The user said no, or could not be asked."""


def confirm(question: str, *, yes: bool, stdin: TextIO | None = None,
            ask: Callable[[str], str] = input) -> None:
    """Return if the action may go ahead; raise :class:`NotConfirmed` with the reason if not."""
    if yes:
        return
    stream = sys.stdin if stdin is None else stdin
    if not stream.isatty():
        raise NotConfirmed("refusing: stdin is not a terminal, so no confirmation can be "
                           "asked; pass --yes to go ahead")
    try:
        answer = ask(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise NotConfirmed("not confirmed; nothing was changed")
