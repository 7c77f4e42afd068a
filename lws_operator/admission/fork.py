"""The admission child forked by ``lws-operator run`` at its start, so that the two processes
hold the interpreter and the modules both import once.

A child started as ``python -m lws_operator.admission.child`` is a second interpreter that
imports ``ssl``, ``asyncio``, uvloop and the webhooks' modules again: about 15 MiB of memory of
its own at rest, which a pod's memory limit counts next to the operator's. Forked from the
operator after those imports, the child shares the parent's pages until one of the two writes
to them (copy on write). Its own memory is then what it allocates and writes to, and the
original of every page the parent writes to after the fork (CPython writes into every object
it uses, its reference count at least): about 10.5 MiB at rest against 15 for a spawned child
(``docs/performance.md``, "Memory", has the figures).

Forking is safe only before any thread or event loop exists (a thread's locks would be copied
held; an epoll descriptor would be shared by both loops), so ``lws-operator run`` forks in
``main`` once its flags are read: before it reads the configuration file (pydantic's models,
which the parent goes on using, would leave the child the originals of pages the parent
writes), before it imports the controllers' stack (the child would only map it) and before the
loop starts. The child then waits, blocked on its
end of the socket pair, until the parent starts it with its settings and the webhook port's
sockets (``protocol.send_start``) once the first certificate is served, as a spawned child
would have been started then. Until the start the child is idle; a parent that exits first
(a startup error) closes the pair, and the child exits with it.

``gc.freeze()`` before the fork moves every object tracked so far to the collector's permanent
generation, in both processes: a collection never walks them, so it does not write to their
headers, which would copy their pages. They are modules, classes and functions that live as
long as the process anyway.

A child that dies later is started again as a new interpreter (``AdmissionProcess``): the
operator has threads and a loop by then. So does a process that already had threads when it
would have forked (``fork_admission_child`` returns None).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import socket
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import NoReturn

# The process name (``comm``, 15 bytes) the child shows in ``ps`` and ``top``: its command line
# is its parent's.
PROCESS_NAME = b"lws-admission"
_PR_SET_NAME = 15  # linux/prctl.h


@dataclass
class ForkedChild:
    """The parent's side of a forked admission child waiting to be started: its pid and the
    parent's end of their socket pair (blocking until the parent's loop takes it over)."""

    pid: int
    control: socket.socket
    taken: bool = False

    def take(self) -> socket.socket:
        """The pair, for ``AdmissionProcess``, which from now on starts, reaps or ends the
        child."""
        self.taken = True
        return self.control

    def discard(self) -> None:
        """Unless taken: close the pair, which ends the waiting child, and reap it (blocking:
        it exits at once). For a run that ends before it serves (a startup error)."""
        if self.taken:
            return
        self.take().close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def fork_admission_child() -> ForkedChild | None:
    """Fork the admission child now (module docstring); None, forking nothing, when this
    process already runs other threads or cannot fork. Call it before any event loop
    exists."""
    if threading.active_count() != 1 or not hasattr(os, "fork"):
        return None
    # What the child serves with: imported here, so both processes hold it once.
    import uvloop  # noqa: F401

    from lws_operator.admission import child  # noqa: F401

    parent_end, child_end = socket.socketpair()
    gc.collect()
    gc.freeze()
    try:
        pid = os.fork()
    except OSError:  # no process to be had now (a limit): the child is spawned when needed
        parent_end.close()
        child_end.close()
        return None
    if pid == 0:
        _become_child(parent_end, child_end)
    child_end.close()
    return ForkedChild(pid, parent_end)


def _become_child(parent_end: socket.socket, child_end: socket.socket) -> NoReturn:
    """The child's whole life after the fork; it never returns into the parent's code."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        parent_end.close()  # else the parent's exit would not end the pair for this process
        _detach_stdin()
        _name_process()
        from lws_operator.admission.child import run_forked

        code = run_forked(child_end)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _detach_stdin() -> None:
    """Standard input from ``/dev/null``, as a spawned child has it: the parent's terminal or
    pipe is not the child's to hold open."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _name_process() -> None:
    """``lws-admission`` in ``ps -o comm`` and ``top`` (Linux; nothing elsewhere)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_NAME, PROCESS_NAME, 0, 0, 0)


class ForkedProcess:
    """The parent's handle on its forked child once started, as ``asyncio.subprocess.Process``
    is on a spawned one (``pid``, ``returncode``, ``wait``, ``kill``): the loop reaps it when
    its pidfd turns readable (polled where there is no pidfd)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[int] = self._loop.create_future()
        self._pidfd: int | None = None
        self._poll: asyncio.Task[None] | None = None
        try:
            self._pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._poll = self._loop.create_task(self._polled(), name=f"reap {pid}")
        else:
            self._loop.add_reader(self._pidfd, self._reap)
        self._reap()

    def _reap(self) -> None:
        if self.returncode is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: its status is lost
            pid, status = self.pid, 255 << 8
        if pid == 0:
            return
        self.returncode = os.waitstatus_to_exitcode(status)
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if not self._exited.done():
            self._exited.set_result(self.returncode)

    async def _polled(self) -> None:
        while self.returncode is None:
            await asyncio.sleep(0.1)
            self._reap()

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
