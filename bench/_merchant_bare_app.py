"""The merchant benchmark's baseline: the same two-round-trip flow on a bare a2a-sdk server, without payment.

A plain a2a-sdk app (``DefaultRequestHandler`` with SDK defaults, ``create_jsonrpc_routes``) whose executor
answers a new task's first message with ``TASK_STATE_INPUT_REQUIRED`` and, on the follow-up message,
runs the reference merchant's text-stats work (``TextStatsExecutor``: one artifact, then completion). So
the paid and the bare flow do the same work in the same number of round trips, and differ only by the
payment layer, the ledger and the settlement.

Tasks live in a ``DatabaseTaskStore`` on ``BENCH_BARE_DATABASE_URL`` (a database migrated with the
project's migrations, so the ``tasks`` table is the one the merchant uses), or in an ``InMemoryTaskStore``
when that variable is empty. Run with ``uvicorn --factory bench._merchant_bare_app:create_app``; the
JSON-RPC route is at the merchant's path, so both servers receive the same request bytes.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from a2a.helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a_x402.merchant.demo_skill import TEXT_STATS_SKILL, TextStatsExecutor
from a2a_x402.merchant.edge import HEALTH_PATH, JSONRPC_PATH
from a2a_x402.storage import create_engine

__all__ = ["DATABASE_URL_ENV", "TwoStepExecutor", "create_app"]

DATABASE_URL_ENV = "BENCH_BARE_DATABASE_URL"
"""The environment variable naming the task database (empty: tasks in memory)."""


class TwoStepExecutor(AgentExecutor):
    """First message: input required. Follow-up on the task: the text-stats artifact and completion."""

    def __init__(self) -> None:
        self._work = TextStatsExecutor()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Ask for input on a new task; do the work on the follow-up."""
        if context.current_task is not None:
            await self._work.execute(context, event_queue)
            return
        if context.message is None:
            raise ValueError("a new task needs a message")
        await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.requires_input(
            new_text_message(
                "Send the follow-up to run the work.",
                context_id=context.context_id,
                task_id=context.task_id,
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing runs between the two messages, so cancelling only marks the task."""
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def _card() -> AgentCard:
    return AgentCard(
        name="bare two-step agent",
        description="The merchant benchmark's baseline: the paid flow's round trips without payment.",
        version="0.1.0",
        supported_interfaces=[
            AgentInterface(url=JSONRPC_PATH, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["application/json", "text/plain"],
        skills=[TEXT_STATS_SKILL],
    )


async def _healthz(_request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def create_app() -> Starlette:
    """The bare app, its task store chosen by ``BENCH_BARE_DATABASE_URL``."""
    database_url = os.environ.get(DATABASE_URL_ENV, "")
    engine: AsyncEngine | None = create_engine(database_url) if database_url else None
    store: TaskStore = (
        DatabaseTaskStore(engine, create_table=False) if engine is not None else InMemoryTaskStore()
    )
    handler = DefaultRequestHandler(TwoStepExecutor(), store, _card())

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if engine is not None:
                await engine.dispose()

    routes = [*create_jsonrpc_routes(handler, JSONRPC_PATH), Route(HEALTH_PATH, _healthz, methods=["GET"])]
    return Starlette(routes=routes, lifespan=lifespan)
