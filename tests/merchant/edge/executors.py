"""A scripted `AgentExecutor` for the edge tests; the first message's text picks the script.

- "quote": asks a question (TASK_STATE_INPUT_REQUIRED); the follow-up gets an artifact and COMPLETED.
- "stream": three WORKING status updates, an artifact, then COMPLETED.
- "slow": WORKING, then waits until canceled.
- "bad-response": breaks the SDK's event rules (a Message after the Task): InvalidAgentResponse.
- anything else: an artifact echoing the text, then COMPLETED.
"""

from __future__ import annotations

import asyncio

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import TaskState

QUESTION = "Which size do you want?"
STREAM_STEPS = 3


class ScriptedExecutor(AgentExecutor):
    """Plays the script named by the first message of a task."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run one turn of the task."""
        assert context.message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f"order: {text}")], name="order")
            await updater.complete()
        elif text == "quote":
            await updater.requires_input(updater.new_agent_message([new_text_part(QUESTION)]))
        elif text == "stream":
            for step in range(STREAM_STEPS):
                progress = updater.new_agent_message([new_text_part(f"step {step}")])
                await updater.update_status(TaskState.TASK_STATE_WORKING, message=progress)
            await updater.add_artifact([new_text_part("streamed")], name="result")
            await updater.complete()
        elif text == "bad-response":
            await event_queue.enqueue_event(updater.new_agent_message([new_text_part("too late")]))
        elif text == "slow":
            await updater.start_work()
            await asyncio.Event().wait()
        else:
            await updater.add_artifact([new_text_part(f"echo: {text}")], name="result")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Mark the task canceled."""
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()
