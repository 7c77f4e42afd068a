"""Values of the command lines' flags and of their ``LWS_*`` environment variables, parsed one way.

Every flag of ``lws-operator run`` can come from the environment. An environment value is not
parsed while the parser is built (a bad ``LWS_WORKERS`` would then be a traceback before even
``--help`` could print): it becomes the flag's default as an :class:`EnvValue`, a string that
remembers its variable, and argparse converts it with the flag's own ``type`` after the command
line was read, as it converts every string default. A bad value is so reported exactly as a bad
flag is, through :meth:`Parser.error`, naming both the flag and the variable::

    lws-operator run: error: argument --workers: LWS_WORKERS='abc': not an integer

argparse checks ``choices`` only for values given on the command line, so the types here check
them themselves (:func:`one_of`), for the environment's values too.

One spelling of each kind of value for the whole project: booleans are Go's
``strconv.ParseBool``'s (the Go manager's flags and its deployments use them), durations Go's
``time.ParseDuration``'s (``api.go_duration``, which the configuration file uses as well).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from lws_operator.api.go_duration import parse_go_duration

__all__ = [
    "EnvValue",
    "Parser",
    "Switch",
    "boolean",
    "count",
    "duration",
    "env",
    "log_level",
    "number",
    "one_of",
    "parse_bool",
    "port",
    "zap_log_level",
]

T = TypeVar("T")

# Go's strconv.ParseBool, exactly.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
# zap's level names (the Go manager's --zap-log-level), or a number.
ZAP_LEVELS = ("debug", "info", "warn", "error", "dpanic", "panic", "fatal")


class EnvValue(str):
    """A flag's default taken from the environment: the text, and the variable it came from."""

    variable: str

    def __new__(cls, text: str, variable: str) -> EnvValue:
        value = super().__new__(cls, text)
        value.variable = variable
        return value


def env(name: str, *fallbacks: str) -> EnvValue | None:
    """``LWS_<NAME>`` (``webhook-port`` -> ``LWS_WEBHOOK_PORT``), else the first of
    ``fallbacks`` (variable names, such as ``POD_NAMESPACE``) that is set, else None."""
    for variable in ("LWS_" + name.upper().replace("-", "_"), *fallbacks):
        value = os.environ.get(variable)
        if value is not None:
            return EnvValue(value, variable)
    return None


def _source(text: str) -> str:
    """How a message names the value: ``'abc'`` from the command line, ``LWS_X='abc'`` from
    the environment."""
    if isinstance(text, EnvValue):
        return f"{text.variable}={str(text)!r}"
    return repr(str(text))


def parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool: 1, t, T, TRUE, true, True and their false counterparts;
    ``ValueError`` for anything else."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"not a boolean: {text!r} (true or false)")


def _typed(parse: Callable[[str], T], expected: str) -> Callable[[str], T]:
    """An argparse ``type`` from ``parse`` (raising ``ValueError``): its error names the
    value, and the environment variable when the value came from one."""
    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_source(text)}: {expected}") from None
    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


boolean = _typed(parse_bool, "not a boolean (true or false)")


def _duration(text: str) -> dt.timedelta:
    value = parse_go_duration(text)
    if value < dt.timedelta(0):
        raise ValueError("negative")
    return value


duration = _typed(_duration, "not a duration (e.g. 30s, 1m30s, 500ms, 8760h)")


def _integer(low: int, high: int | None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if value < low or (high is not None and value > high):
            raise ValueError(text)
        return value
    return parse


def count(low: int = 0) -> Callable[[str], int]:
    """A whole number of at least ``low``."""
    return _typed(_integer(low, None), f"not a whole number of at least {low}")


port = _typed(_integer(0, 65535), "not a port (0 to 65535)")


def _number(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):  # NaN and infinities too
        raise ValueError(text)
    return value


number = _typed(_number, "not a number of at least 0")


def one_of(*choices: str, fold: bool = False) -> Callable[[str], str]:
    """One of ``choices`` (compared in lower case when ``fold``)."""
    def parse(text: str) -> str:
        value = str(text).strip().lower() if fold else str(text)
        if value not in choices:
            raise ValueError(text)
        return value
    return _typed(parse, "not one of " + ", ".join(choices))


log_level = one_of(*LOG_LEVELS, fold=True)


def _zap(text: str) -> str:
    value = str(text).strip().lower()
    if value.isdigit() or value in ZAP_LEVELS:
        return value
    raise ValueError(text)


zap_log_level = _typed(_zap, "not a level (" + ", ".join(ZAP_LEVELS) + ", or a number)")


class Switch(argparse.Action):
    """A flag that takes no value and sets ``const`` (``--disable-controllers``,
    ``--no-register-webhooks``); its default may be an environment variable's boolean (the
    value of ``dest``, not of the flag), which :data:`boolean` converts after the command line
    was read."""

    def __init__(self, option_strings: list[str], dest: str, const: bool = True,
                 default: Any = None, help: str | None = None,
                 ) -> None:
        super().__init__(option_strings, dest, nargs=0, const=const,
                         default=not const if default is None else default, type=boolean,
                         help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, self.const)


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``PROG: error: MESSAGE``, exit 2) instead
    of the whole usage, which for ``run`` is a screenful that buries the message."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)

