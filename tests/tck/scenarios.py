"""The agent the official A2A 1.0 TCK talks to: its scenarios, played by message id prefix.

The TCK says what the agent behind the server must do in Gherkin (`scenarios/*.feature` in the TCK) and
picks the scenario with the prefix of the first message's `messageId` (`tck-complete-task-<session>`,
`tck-stream-001-<session>`, ...). `ScenarioExecutor` is this project's own player of those scenarios,
written against a2a-sdk's `TaskUpdater` like any product executor; it runs behind the payment layer
with every skill free, so what the TCK judges is the edge and the payment layer around a plain agent.

A prefix that is also the start of a longer one (`tck-artifact-file` of `tck-artifact-file-url`) loses to
the longer: the table is searched longest prefix first. An unknown prefix completes the task saying so.

The A2A 0.3 TCK names one scenario only (`test-resubscribe-message-id`, the same as 1.0's); its other
messages are plain requests, which its own SUT works on for a while before it answers. Its run plays them
with `work_then_answer`, the same pacing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from a2a.helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.struct_pb2 import Value

__all__ = ["CORE_WORK_S", "RESUBSCRIBE_WAIT_S", "ScenarioExecutor", "work_then_answer"]

RESUBSCRIBE_WAIT_S = 4.0
"""How long the resubscription scenario works: twice the TCK's streaming timeout (2 s)."""
CORE_WORK_S = 1.2
"""How long `work_then_answer` works: as long as the 0.3 TCK's Python SUT (python-sut/tck_core_agent)."""

Scene = Callable[[TaskUpdater, EventQueue], Awaitable[None]]


def _text(text: str) -> Part:
    return Part(text=text)


def _file_bytes() -> Part:
    return Part(raw=b"tck", media_type="text/plain", filename="output.txt")


def _data() -> Part:
    value = Value()
    value.struct_value.update({"key": "value", "count": 42})
    return Part(data=value)


def _artifact_then_complete(part: Callable[[], Part], *, working: bool) -> Scene:
    """A scene that (optionally reports WORKING,) adds one artifact of `part` and completes."""

    async def scene(updater: TaskUpdater, _queue: EventQueue) -> None:
        if working:
            await updater.start_work()
        await updater.add_artifact([part()])
        await updater.complete()

    return scene


async def _complete_with_greeting(updater: TaskUpdater, _queue: EventQueue) -> None:
    await updater.complete(updater.new_agent_message([_text("Hello from TCK")]))


async def _complete(updater: TaskUpdater, _queue: EventQueue) -> None:
    await updater.complete()


async def _file_url(updater: TaskUpdater, _queue: EventQueue) -> None:
    part = Part(url="https://example.com/output.txt", media_type="text/plain", filename="output.txt")
    await updater.add_artifact([part])
    await updater.complete()


async def _ask_for_input(updater: TaskUpdater, _queue: EventQueue) -> None:
    await updater.requires_input()


async def _reject(updater: TaskUpdater, _queue: EventQueue) -> None:
    await updater.reject(updater.new_agent_message([_text("rejected")]))


async def _chunked(updater: TaskUpdater, _queue: EventQueue) -> None:
    await updater.start_work()
    await updater.add_artifact([_text("chunk-1 ")], artifact_id="chunked")
    await updater.add_artifact([_text("chunk-2")], artifact_id="chunked", append=True, last_chunk=True)
    await updater.complete()


async def _long_running(updater: TaskUpdater, _queue: EventQueue) -> None:
    await updater.start_work()
    await asyncio.sleep(RESUBSCRIBE_WAIT_S)
    await updater.complete()


_SCENES: dict[str, Scene] = {
    "tck-complete-task": _complete_with_greeting,
    "tck-artifact-text": _artifact_then_complete(lambda: _text("Generated text content"), working=False),
    "tck-artifact-file": _artifact_then_complete(_file_bytes, working=False),
    "tck-artifact-file-url": _file_url,
    "tck-artifact-data": _artifact_then_complete(_data, working=False),
    "tck-input-required": _ask_for_input,
    "tck-reject-task": _reject,
    "tck-stream-001": _artifact_then_complete(lambda: _text("Stream hello from TCK"), working=True),
    "tck-stream-002": _complete,
    "tck-stream-003": _artifact_then_complete(lambda: _text("Stream task lifecycle"), working=True),
    "tck-stream-ordering-001": _artifact_then_complete(lambda: _text("Ordered output"), working=True),
    "tck-stream-artifact-text": _artifact_then_complete(lambda: _text("Streamed text content"), working=True),
    "tck-stream-artifact-file": _artifact_then_complete(_file_bytes, working=True),
    "tck-stream-artifact-chunked": _chunked,
    "test-resubscribe-message-id": _long_running,
}
_BY_LENGTH = sorted(_SCENES.items(), key=lambda item: len(item[0]), reverse=True)
_MESSAGE_RESPONSE = "tck-message-response"


async def _say_unknown(updater: TaskUpdater, message_id: str) -> None:
    unknown = f"no TCK scenario for message id {message_id!r}"
    await updater.update_status(TaskState.TASK_STATE_COMPLETED, updater.new_agent_message([_text(unknown)]))


async def work_then_answer(updater: TaskUpdater, message_id: str) -> None:
    """What the 0.3 TCK's own Python SUT does with any message: work a while, answer in an artifact, complete.

    The 0.3 TCK keys no behaviour on message ids but the resubscription one; it cancels and continues the
    tasks its plain messages start, which only a task still working can take.
    """
    await updater.start_work()
    await asyncio.sleep(CORE_WORK_S)
    await updater.add_artifact([_text(f"Hello from TCK: {message_id}")], name="response")
    await updater.complete()


class ScenarioExecutor(AgentExecutor):
    """Plays the TCK scenario named by the message id's prefix (see the module docstring); a message of no
    scenario is given to `otherwise` (by default: completed at once, saying so)."""

    def __init__(self, otherwise: Callable[[TaskUpdater, str], Awaitable[None]] = _say_unknown) -> None:
        self._otherwise = otherwise

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the scenario of `context.message`."""
        message = context.message
        if message is None:
            raise InvalidParamsError(message="a TCK scenario starts from a message")
        if message.message_id.startswith(_MESSAGE_RESPONSE):
            # The one scenario answered without a task.
            reply = new_text_message("Direct message response", context_id=context.context_id)
            await event_queue.enqueue_event(reply)
            return
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        for prefix, scene in _BY_LENGTH:
            if message.message_id.startswith(prefix):
                await scene(updater, event_queue)
                return
        await self._otherwise(updater, message.message_id)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task (the long-running scenario is the only one still working to be canceled)."""
        if context.task_id is None or context.context_id is None:
            raise InvalidParamsError(message="cancel needs a task")
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()
