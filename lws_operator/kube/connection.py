"""Loading the cluster credentials and reaching the API server, with failures as one line.

The client library reports a missing kubeconfig as ``Invalid kube-config file. Expected key
current-context`` (after logging a warning of its own), a context that is not there as a
``KeyError``-like message, and an unreachable server as an aiohttp exception whose text is the
socket's. A person running ``kubectl lws`` or ``lws-operator run`` needs one line that names the
input to fix: the kubeconfig file, the context, the server's address. :func:`load_configuration`
and :func:`unreachable` say it so; :class:`CredentialsError` carries the line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from pathlib import Path

import aiohttp
from kubernetes.aio import client, config
from kubernetes.aio.config.config_exception import ConfigException

__all__ = ["CONNECTION_ERRORS", "CredentialsError", "load_configuration", "unreachable"]

# What a request raises when the API server cannot be reached or spoken to (an API error is
# ``ApiException`` instead, with the server's answer).
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientError, OSError, asyncio.TimeoutError, ssl.SSLError)

DEFAULT_KUBECONFIG = "~/.kube/config"


class CredentialsError(Exception):
    """The credentials cannot be loaded; the message is one line naming the input."""


def _paths(kubeconfig: str | None) -> tuple[str, list[str]]:
    """Where the kubeconfig is read from (as the user would name it) and its files (``$KUBECONFIG``
    may list several, separated as ``PATH`` is)."""
    if kubeconfig:
        return kubeconfig, [p for p in kubeconfig.split(os.pathsep) if p]
    from_env = os.environ.get("KUBECONFIG")
    if from_env:
        return f"KUBECONFIG={from_env}", [p for p in from_env.split(os.pathsep) if p]
    return DEFAULT_KUBECONFIG, [DEFAULT_KUBECONFIG]


def _files(kubeconfig: str | None) -> tuple[str, list[str], str | None]:
    """The kubeconfig as named, its readable files, and what is wrong when there is none."""
    source, paths = _paths(kubeconfig)
    readable = [p for p in paths if Path(p).expanduser().is_file()
                and os.access(Path(p).expanduser(), os.R_OK)]
    if readable:
        return source, readable, None
    if any(Path(p).expanduser().exists() for p in paths):
        return source, [], "not a readable file"
    return source, [], "no such file"


async def load_configuration(kubeconfig: str | None, context: str | None,
                             conf: client.Configuration) -> None:
    """The kubeconfig's ``context`` (or its current one) into ``conf``, as kubectl reads it:
    ``kubeconfig`` if given, else ``$KUBECONFIG``, else ``~/.kube/config``.
    ``CredentialsError`` names what is wrong."""
    source, readable, problem = _files(kubeconfig)
    if problem:
        raise CredentialsError(f"kubeconfig {source}: {problem}")
    quiet = logging.getLogger("kubernetes.aio.config.kube_config")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "Config not found" warning: ours is the error line
    try:
        await config.load_kube_config(config_file=os.pathsep.join(readable), context=context,
                                      client_configuration=conf, persist_config=False)
    except ConfigException as exc:
        text = " ".join(str(exc).split())
        if context and "context" in text.lower():
            raise CredentialsError(f"kubeconfig {source}: no context {context!r}") from None
        raise CredentialsError(f"kubeconfig {source}: {text}") from None
    except Exception as exc:  # YAML errors, files of the wrong shape, unreadable certificates
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise CredentialsError(f"kubeconfig {source}: {text}") from None
    finally:
        quiet.setLevel(level)


def unreachable(exc: BaseException, host: str | None) -> str:
    """One line for a request that failed before the API server answered."""
    where = f"the API server at {host}" if host else "the API server"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"cannot verify {where}: {exc.certificate_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        err = exc.os_error
        reason = (os.strerror(err.errno) if err.errno else err.strerror) or str(err) \
            or type(err).__name__
        return f"cannot reach {where}: {reason}"
    if isinstance(exc, asyncio.TimeoutError):
        return f"cannot reach {where}: no answer in time"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"cannot reach {where}: {text}"
