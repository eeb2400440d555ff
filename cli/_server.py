"""The uvicorn server of a `serve` command: it settles the heap once the app has started, and a failed
startup raises the exception the app's lifespan raised, for the command to answer.

uvicorn answers a failed startup itself: it logs the lifespan's traceback and "Application startup failed.
Exiting." and exits with status 3. A mistake found only at startup (a gRPC port taken after `serve`
checked it) would then be a traceback instead of one line; raised, it is answered like every other
mistake (`answer`), and anything else as an unexpected failure, its traceback in the log.
"""

from __future__ import annotations

import logging
import socket
import sys

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
    failed startup raises the lifespan's exception (uvicorn would log it and exit with status 3)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        config.load()  # chooses the lifespan class, replaced here (uvicorn loads a loaded config no more)
        if config.lifespan_class is LifespanOn:
            config.lifespan_class = _RaisingLifespan

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        settle_heap()
