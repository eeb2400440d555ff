"""The uvicorn server of a `serve` command: it settles the heap once the app has started, a failed
startup raises the exception the app's lifespan raised, for the command to answer, and SIGINT (Ctrl-C) or
SIGTERM stop it gracefully with one line and exit status 0.

uvicorn answers a failed startup itself: it logs the lifespan's traceback and "Application startup failed.
Exiting." and exits with status 3. A mistake found only at startup (a gRPC port taken after `serve`
checked it) would then be a traceback instead of one line; raised, it is answered like every other
mistake (`answer`), and anything else as an unexpected failure, its traceback in the log.

On SIGINT or SIGTERM uvicorn stops accepting, lets the requests in flight finish (a paid turn settles and is
booked before its answer is sent) and runs the lifespan's shutdown; then it raises the signal again, so that
the process ends as the signal's default would: click answers the SIGINT with "Aborted!" and exit status 1,
and SIGTERM kills the process (143) with nothing said. A stop the operator asked for is no failure: the
server logs one line naming the signal instead, and the command exits 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator

import click
import uvicorn
from uvicorn.lifespan.on import LifespanOn, LifespanSendMessage

from ._heap import settle_heap

__all__ = ["Server"]


class _RaisingLifespan(LifespanOn):
    """uvicorn's lifespan protocol, whose failed startup raises the app's exception instead of logging it."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.failure: BaseException | None = None

    async def send(self, message: LifespanSendMessage) -> None:
        if message["type"] == "lifespan.startup.failed":
            # Starlette sends this from the `except` block of the exception the startup raised.
            self.failure = sys.exception()
            if self.failure is not None:
                message = {"type": "lifespan.startup.failed", "message": ""}  # no traceback in the log
        await super().send(message)

    async def startup(self) -> None:
        self.logger.addFilter(self._unless_failed)
        try:
            await super().startup()
        finally:
            self.logger.removeFilter(self._unless_failed)
        if self.failure is not None:
            raise self.failure

    def _unless_failed(self, _record: logging.LogRecord) -> bool:
        # "Application startup failed. Exiting.": the command's answer says what failed instead.
        return self.failure is None


class Server(uvicorn.Server):
    """uvicorn's server, settling the heap once the app has started (its lifespan opened everything); a
    failed startup raises the lifespan's exception (uvicorn would log it and exit with status 3); stopped by
    SIGINT or SIGTERM, it logs one line as `name` (by default the click command's name) and returns."""

    def __init__(self, config: uvicorn.Config, *, name: str | None = None) -> None:
        super().__init__(config)
        context = click.get_current_context(silent=True)
        command = context.find_root().info_name if context is not None else None
        self.name = name or command or os.path.basename(sys.argv[0]) or "x402"
        self.stopped_by: signal.Signals | None = None
        """The signal that stopped the server, once it has."""
        config.load()  # chooses the lifespan class, replaced here (uvicorn loads a loaded config no more)
        if config.lifespan_class is LifespanOn:
            config.lifespan_class = _RaisingLifespan

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        settle_heap()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            try:
                yield
            finally:
                # uvicorn raises every signal it captured again once its handlers are restored; a
                # graceful stop ends here instead. Its list is private, read and emptied only here.
                captured = self._captured_signals
                if captured:
                    self.stopped_by = signal.Signals(captured[-1])
                    captured.clear()
        if self.stopped_by is None:
            return
        if self.force_exit:  # a second Ctrl-C: uvicorn stopped waiting for the requests in flight
            logging.getLogger(self.name).warning(
                "%s stopped by a second %s: requests in flight were cut off", self.name, self.stopped_by.name
            )
        else:
            logging.getLogger(self.name).info(
                "%s stopped by %s: requests in flight were finished", self.name, self.stopped_by.name
            )
