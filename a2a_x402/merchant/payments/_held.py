"""An event queue that lets progress through and holds back what must wait for payment."""

from __future__ import annotations

from dataclasses import dataclass, field

from a2a.server.events import Event, EventQueue
from a2a.types import (
    Artifact,
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from a2a_x402.extension import PaymentUsage

__all__ = ["HoldingQueue", "WorkOutcome"]

_DONE = {TaskState.TASK_STATE_COMPLETED}
_GAVE_UP = {
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
}


@dataclass
class WorkOutcome:
    """What the wrapped executor produced: its artifacts, how it ended, and a metered turn's usage."""

    artifacts: list[Artifact] = field(default_factory=list)
    final_status: TaskStatus | None = None
    usage: PaymentUsage | None = None

    @property
    def completed(self) -> bool:
        """Whether the work finished successfully (and so may be paid for)."""
        return self.final_status is not None and self.final_status.state in _DONE


class HoldingQueue(EventQueue):
    """Passes the delegate's progress (working updates) through; holds artifacts and its final status.

    Artifacts are the paid-for product: they reach the client only after settlement succeeded. The
    delegate's terminal status is held too, because the payment layer decides how the task ends.
    """

    def __init__(self, target: EventQueue, task: Task):
        self._target = target
        self._task = task
        self.outcome = WorkOutcome()

    async def enqueue_event(self, event: Event) -> None:
        """Route one event from the delegate."""
        if isinstance(event, TaskArtifactUpdateEvent):
            self._hold_artifact(event)
        elif isinstance(event, TaskStatusUpdateEvent):
            if event.status.state in _DONE or event.status.state in _GAVE_UP:
                self.outcome.final_status = event.status
            else:
                await self._target.enqueue_event(event)
        elif isinstance(event, Message):
            # A reply message is the product of the work: keep it as an artifact.
            self.outcome.artifacts.append(
                Artifact(artifact_id=event.message_id or "reply", name="reply", parts=event.parts)
            )
            self.outcome.final_status = TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
        elif isinstance(event, Task):
            for artifact in event.artifacts:
                self.outcome.artifacts.append(artifact)
            if event.status.state in _DONE or event.status.state in _GAVE_UP:
                self.outcome.final_status = event.status

    def _hold_artifact(self, event: TaskArtifactUpdateEvent) -> None:
        for held in self.outcome.artifacts:
            if held.artifact_id == event.artifact.artifact_id and event.append:
                held.parts.extend(event.artifact.parts)
                return
        copy = Artifact()
        copy.CopyFrom(event.artifact)
        self.outcome.artifacts.append(copy)
