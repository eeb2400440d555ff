"""How the payer folds the merchant's answers and stream events into its picture of the task."""

from __future__ import annotations

import pytest
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from a2a_x402.extension import EXTENSION_URI
from a2a_x402.payer import MerchantError, StageKind
from a2a_x402.payer._stages import TaskView


def artifact_event(text: str, *, append: bool, task_id: str = "t1") -> StreamResponse:
    artifact = Artifact(artifact_id="a1", name="out", parts=[Part(text=text)])
    update = TaskArtifactUpdateEvent(task_id=task_id, context_id="c1", artifact=artifact, append=append)
    return StreamResponse(artifact_update=update)


def test_a_stream_that_opens_with_an_update_still_builds_the_task() -> None:
    view = TaskView()
    status = TaskStatus(
        state=TaskState.TASK_STATE_WORKING, message=Message(role=Role.ROLE_AGENT, parts=[Part(text="busy")])
    )

    stage = view.apply(
        StreamResponse(status_update=TaskStatusUpdateEvent(task_id="t1", context_id="c1", status=status))
    )

    assert (stage.kind, stage.task_id, stage.state, stage.message) == (
        StageKind.STATUS,
        "t1",
        TaskState.TASK_STATE_WORKING,
        "busy",
    )
    assert view.task.context_id == "c1"


def test_artifact_chunks_are_appended_and_replaced_by_id() -> None:
    view = TaskView()
    view.replace(Task(id="t1", context_id="c1"))

    view.apply(artifact_event("one ", append=False))
    stage = view.apply(artifact_event("two", append=True))

    assert stage.kind is StageKind.ARTIFACT
    assert [p.text for p in view.task.artifacts[0].parts] == ["one ", "two"]
    view.apply(artifact_event("again", append=False))
    assert [[p.text for p in a.parts] for a in view.task.artifacts] == [["again"]]


def test_a_message_instead_of_a_task_or_news_of_another_task_is_refused() -> None:
    view = TaskView()
    view.replace(Task(id="t1", context_id="c1"))

    with pytest.raises(MerchantError, match="message instead of a task: 'hello'"):
        view.apply(StreamResponse(message=Message(role=Role.ROLE_AGENT, parts=[Part(text="hello")])))
    with pytest.raises(MerchantError, match="about task 't2'"):
        view.apply(artifact_event("x", append=False, task_id="t2"))


def test_malformed_extension_data_is_the_merchants_fault() -> None:
    message = Message(role=Role.ROLE_AGENT, parts=[Part(text="pay")])
    message.metadata.update({EXTENSION_URI: {"status": "nope"}})
    view = TaskView()

    with pytest.raises(MerchantError, match="x402 metadata is malformed"):
        view.replace(
            Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED, message=message))
        )
