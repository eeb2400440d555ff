"""Two skills at two prices, for two tenants: one paid agent, two payees, each with its own price list.

The agent (`WordTools`) offers two skills: `count-words` and `reverse` (the words in reverse order). The
client names the skill it wants in its message's metadata, `{"skill": "reverse"}`; `skill_of` tells
`paid_app` which one a message asks for, so that the request is priced before the executor runs.

Prices are per skill and per tenant, in the token's atomic units:

    tenant          payee (tenants.toml)   count-words   reverse
    default         anvil account 8        10000         50000     (this file's PRICES)
    acme            anvil account 6        20000         80000     (tenants.toml)

A request naming no tenant is the default tenant's; an A2A 1.0 client names `acme` in its requests (the
`tenant` field), an A2A 0.3 client uses the URLs under `/t/acme`. The tenants come from the tenants file
beside this script (or `X402_TENANTS_FILE`).

Run it on the dev chain (examples/README.md has every step):

    eval "$(x402-devchain --export)"
    python examples/two_tenants.py --port 8002
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import uvicorn
from a2a.helpers import get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentSkill, Message, Part

from a2a_x402.cli import ConfigError, load_settings
from a2a_x402.merchant import MerchantSettings, PaidAppError, paid_app
from a2a_x402.merchant.tenants import TenantConfigError
from a2a_x402.observability import LogSettingsError, configure_logging
from a2a_x402.storage import upgrade_schema

COUNT_WORDS = AgentSkill(
    id="count-words", name="Count words", description="How many words a text has.", tags=["text"]
)
REVERSE = AgentSkill(
    id="reverse", name="Reverse", description="A text's words in reverse order.", tags=["text"]
)
PRICES = {COUNT_WORDS.id: 10_000, REVERSE.id: 50_000}
"""The default tenant's price of each skill in atomic units (0.01 and 0.05 USDC); acme's: tenants.toml."""

TENANTS_FILE = Path(__file__).with_name("tenants.toml")


def skill_of(message: Message) -> str:
    """The skill a message asks for: its metadata's `skill`, else `count-words`.

    An id that names no skill of the agent is refused by `paid_app` before any task or price exists.
    """
    return str(message.metadata["skill"]) if "skill" in message.metadata else COUNT_WORDS.id


class WordTools(AgentExecutor):
    """Counts a text's words, or reverses their order, as the message's skill says."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Answer with one text artifact and complete the task (called only for a paid request)."""
        if context.message is None or context.task_id is None or context.context_id is None:
            raise ValueError("a turn always has a message and ids")
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        words = get_message_text(context.message).split()
        if skill_of(context.message) == REVERSE.id:
            answer = " ".join(reversed(words))
        else:
            answer = f"{len(words)} words"
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.add_artifact([Part(text=answer)], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing runs long enough to stop: just mark the task canceled."""
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def main(argv: list[str] | None = None) -> int:
    """Serve the two-skill agent for both tenants until Ctrl-C; a mistake is one line and exit status 2."""
    parser = argparse.ArgumentParser(description="A paid agent with two skills and two tenants.")
    parser.add_argument("--port", type=int, help="the port to serve on (default: X402_PORT, else 8000)")
    args = parser.parse_args(argv)
    overrides: dict[str, object] = {"tenants_file": os.environ.get("X402_TENANTS_FILE", str(TENANTS_FILE))}
    if args.port is not None:
        overrides["port"] = args.port
    try:
        configure_logging()
        settings = load_settings(MerchantSettings, **overrides)
        app = paid_app(
            WordTools(),
            name="Word tools",
            description="Counts or reverses the words of your text.",
            skills=[COUNT_WORDS, REVERSE],
            prices=PRICES,  # the default tenant's; paid_app refuses a price for a skill not listed
            skill_of=skill_of,
            settings=settings,
        )
        asyncio.run(upgrade_schema(settings.database_url))
    except (ConfigError, LogSettingsError, PaidAppError, TenantConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=None, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
