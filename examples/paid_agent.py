"""A paid agent from scratch: a word counter of your own, charged per request with `paid_app`.

The agent (`WordCounter`) is a plain a2a-sdk `AgentExecutor` that knows nothing of payments. `paid_app`
puts the payment layer in front of it: a request is answered with the x402 terms, the executor runs once a
payment for them is verified, and its answer reaches the client once the payment is settled on chain and
booked. The result is one ASGI app serving A2A 1.0 and 0.3, served here with uvicorn.

Run it on the dev chain (examples/README.md has every step):

    eval "$(x402-devchain --export)"                     # the chain, its token and relayer key
    export X402_PAY_TO=0xa0Ee7A142d267C1f36714E4a8F75612F20a79720   # who is paid
    python examples/paid_agent.py --port 8001
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import uvicorn
from a2a.helpers import get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentSkill, Part

from a2a_x402.cli import ConfigError, load_settings
from a2a_x402.merchant import MerchantSettings, PaidAppError, paid_app
from a2a_x402.observability import LogSettingsError, configure_logging
from a2a_x402.storage import upgrade_schema

COUNT_WORDS = AgentSkill(
    id="count-words", name="Count words", description="How many words a text has.", tags=["text"]
)
PRICE = 10_000
"""The price of one count in the token's atomic units: 0.01 USDC (6 decimals). Money is never a float."""


class WordCounter(AgentExecutor):
    """Answers how many words the message's text has, as one text artifact."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Count the words and complete the task (called only for a paid request)."""
        if context.message is None or context.task_id is None or context.context_id is None:
            raise ValueError("a turn always has a message and ids")
        # The payment layer made the task when it asked for payment; make one only if there is none.
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        words = len(get_message_text(context.message).split())
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.add_artifact([Part(text=f"{words} words")], name="count")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing runs long enough to stop: just mark the task canceled."""
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def main(argv: list[str] | None = None) -> int:
    """Serve the paid word counter until Ctrl-C; a setting's mistake is one line and exit status 2."""
    parser = argparse.ArgumentParser(description="A paid word-counting agent (A2A + x402).")
    parser.add_argument("--port", type=int, help="the port to serve on (default: X402_PORT, else 8000)")
    args = parser.parse_args(argv)
    try:
        configure_logging()  # X402_LOG_LEVEL / X402_LOG_FORMAT; every line is redacted of secrets
        # Everything else comes from the X402_* environment: chain, token, payee, relayer key, database.
        settings = load_settings(MerchantSettings, **({} if args.port is None else {"port": args.port}))
        app = paid_app(
            WordCounter(),
            name="Word counter",
            description="Counts the words of your text, 0.01 USDC a time.",
            skills=[COUNT_WORDS],
            prices={COUNT_WORDS.id: PRICE},
            settings=settings,
        )
        # The merchant's tables (tasks, ledger, offers): what `x402-merchant db upgrade` does; a no-op when
        # they are up to date.
        asyncio.run(upgrade_schema(settings.database_url))
    except (ConfigError, LogSettingsError, PaidAppError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # log_config=None: uvicorn's lines go through the handler configure_logging installed; its own startup
    # lines are held back (the merchant logs where it serves).
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=None, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
