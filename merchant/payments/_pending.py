"""In-process signal from the executor to the request waiting on it: "the settlement is pending"."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PendingSettlements"]


class PendingSettlements:
    """Lets a blocking SendMessage stop waiting once its task's settlement is known to be pending."""

    def __init__(self) -> None:
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    @contextmanager
    def watch(self, task_id: str) -> Iterator[asyncio.Future[None]]:
        """A future that resolves when `announce(task_id)` is called while the block runs."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(task_id, []).append(future)
        try:
            yield future
        finally:
            waiters = self._waiters.get(task_id, [])
            if future in waiters:
                waiters.remove(future)
            if not waiters:
                self._waiters.pop(task_id, None)

    def announce(self, task_id: str) -> None:
        """The task's settlement is pending: release everyone waiting for the task to finish."""
        for future in self._waiters.pop(task_id, []):
            if not future.done():
                future.set_result(None)
