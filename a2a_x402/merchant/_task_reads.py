"""The task reads one request repeats, answered from what the same request last read or saved.

One paid SendMessage reads its task six times: the payment layer's gate, the SDK's existence check, the
context builder, the producer's re-read before the executor runs, and the blocking answer's read after the
task's events. Between them the request writes the task only through the task store, and no other write
of this process can be missed: every save of a task here renews its generation, and a remembered read is
used only while the generation it was taken at is still the task's latest. So a remembered read is the one
the request would have got had it read again at once, before any write of this process, which the store
(last writer wins, no versions) never told apart from a later read anyway.

Another process's write is not seen until the request reads afresh, so a reader that waits for another
replica to move a task on (the payment layer's answer to a payment presented again) calls
`forget_task_reads` before each read. Reads are remembered per request (`ServerCallContext.state`), never
across requests: a GetTask of its own always reads the database.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass

from a2a.server.context import ServerCallContext
from a2a.types import Task

__all__ = ["TaskReads", "forget_task_reads"]

_STATE_KEY = "x402_task_reads"
# Generations of this many tasks are kept; a task whose generation was dropped is read afresh.
_GENERATIONS_KEPT = 65_536


@dataclass(frozen=True, slots=True)
class _Read:
    generation: int
    task: Task | None


def forget_task_reads(context: ServerCallContext) -> None:
    """Make the next reads of this request go to the database (to see another process's writes)."""
    context.state.pop(_STATE_KEY, None)


class TaskReads:
    """What each request last read or saved of each task, valid while no save of this process followed."""

    def __init__(self) -> None:
        self._generations: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._next = itertools.count(1)

    def generation(self, owner: str, task_id: str) -> int:
        """The task's current generation, to be taken before reading it from the database."""
        key = (owner, task_id)
        generation = self._generations.get(key)
        if generation is None:
            generation = self._renew(key)
        return generation

    def recall(self, context: ServerCallContext, owner: str, task_id: str) -> _Read | None:
        """The request's remembered read of the task (a copy), if no save has happened since."""
        reads: dict[tuple[str, str], _Read] | None = context.state.get(_STATE_KEY)
        if reads is None:
            return None
        key = (owner, task_id)
        read = reads.get(key)
        if read is None or self._generations.get(key) != read.generation:
            return None
        return _Read(read.generation, _copy(read.task))

    def stored(self, context: ServerCallContext, owner: str, task_id: str) -> Task | None:
        """The request's remembered read of the task (not a copy: never to be changed), if no save has
        happened since."""
        reads: dict[tuple[str, str], _Read] | None = context.state.get(_STATE_KEY)
        read = reads.get((owner, task_id)) if reads is not None else None
        if read is None or self._generations.get((owner, task_id)) != read.generation:
            return None
        return read.task

    def remember(
        self, context: ServerCallContext, owner: str, task_id: str, task: Task | None, generation: int
    ) -> None:
        """Remember `task` (None: not stored) as read at `generation` by this request."""
        reads = context.state.setdefault(_STATE_KEY, {})
        reads[(owner, task_id)] = _Read(generation, _copy(task))

    def saving(self, owner: str, task_id: str) -> None:
        """A save of the task begins: every remembered read of it, in any request, is stale."""
        self._renew((owner, task_id))

    def saved(self, context: ServerCallContext, owner: str, task: Task) -> None:
        """`task` was saved by this request: remembered as its latest read, and stale for everyone else."""
        self.remember(context, owner, task.id, task, self._renew((owner, task.id)))

    def _renew(self, key: tuple[str, str]) -> int:
        generation = next(self._next)
        self._generations[key] = generation
        self._generations.move_to_end(key)
        if len(self._generations) > _GENERATIONS_KEPT:
            self._generations.popitem(last=False)
        return generation


def _copy(task: Task | None) -> Task | None:
    # The SDK changes the tasks it is given in place: a remembered one must not be shared.
    if task is None:
        return None
    copy = Task()
    copy.CopyFrom(task)
    return copy
