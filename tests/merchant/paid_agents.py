"""Agents of a developer's own, made paid with `paid_app` in the tests: no payment code in any of them.

`Voices` answers a text uppercased (skill `shout`) or lowercased (skill `whisper`, named in the message's
metadata: `skill_named`); `serve_paid` serves `paid_app` over one of them on loopback, on a chain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from a2a.helpers import get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentSkill, Message, Part
from fastapi import FastAPI

from a2a_x402.devchain import DevChain
from a2a_x402.merchant import MerchantSettings
from tests.fixtures.merchant import DEFAULT_PAY_TO, chain_settings, own_relayer_key
from tests.fixtures.servers import base_url_of, bind_loopback, free_port, serve_asgi

SHOUT = AgentSkill(id="shout", name="Shout", description="Upper-cases a text.", tags=["text"])
WHISPER = AgentSkill(id="whisper", name="Whisper", description="Lower-cases a text.", tags=["text"])
SHOUT_PRICE = 50_000
WHISPER_PRICE = 20_000


def skill_named(message: Message) -> str:
    """The skill a message names in its metadata (`{"skill": "whisper"}`), else `shout`."""
    return str(message.metadata["skill"]) if "skill" in message.metadata else SHOUT.id


class Voices(AgentExecutor):
    """The message's text uppercased, or lowercased when it asks for `whisper`; one text artifact."""

    def __init__(self) -> None:
        self.runs = 0

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Answer the text and complete the task."""
        self.runs += 1
        if context.message is None or context.task_id is None or context.context_id is None:
            raise ValueError("a turn always has a message and ids")
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        text = get_message_text(context.message)
        answer = text.lower() if skill_named(context.message) == WHISPER.id else text.upper()
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.add_artifact([Part(text=answer)], name="voice")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing runs long enough to stop."""
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def merchant_settings(
    chain: DevChain, database_url: str, public_url: str, **overrides: Any
) -> MerchantSettings:
    """Settings of a merchant on `chain` and `database_url`, paid to `DEFAULT_PAY_TO`, with a relayer key of
    its own and gRPC on a free port; never read from a developer's environment or `.env`."""
    values: dict[str, Any] = {
        "database_url": database_url,
        **chain_settings(chain),
        "relayer_key": own_relayer_key(chain),
        "pay_to": DEFAULT_PAY_TO,
        "public_url": public_url,
        "grpc_port": free_port(),
        "_env_file": None,
        **overrides,
    }
    return MerchantSettings(**values)


@contextmanager
def serve_paid(
    chain: DevChain, database_url: str, build: Callable[[MerchantSettings], FastAPI], **overrides: Any
) -> Iterator[str]:
    """Serve the app `build` makes from the merchant's settings on loopback; yield its base URL."""
    sock = bind_loopback()
    settings = merchant_settings(chain, database_url, base_url_of(sock), **overrides)
    with serve_asgi(build(settings), sock=sock) as base_url:
        yield base_url
