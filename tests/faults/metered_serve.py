"""`x402-merchant serve` whose text-stats work reports a usage: the fault suite's merchant for metered skills.

The reference merchant's skill reports nothing on its usage meter, so a tenant metering it would always
settle 0. This process serves the same app (`merchant.app.build_app`, configured only by the `X402_*`
environment, on uvicorn with the command's HTTP protocol and keep-alive) with the skill's work reporting
`--tokens` tokens at `UNIT_PRICE` each before it answers: a paid `upto` turn then settles that much, capped
at the tenant's maximum. Run as a script (`python metered_serve.py --tokens N`), SIGKILLed like the command.
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue

from a2a_x402 import cli
from a2a_x402.facilitator import refuse_on_fatal
from a2a_x402.merchant import MerchantSettings, usage_meter
from a2a_x402.merchant.app import build_app
from a2a_x402.merchant.checks import check_merchant
from a2a_x402.merchant.cli import KEEP_ALIVE_S, header_limits
from a2a_x402.merchant.demo_skill import TextStatsExecutor
from a2a_x402.observability import LogSettings, configure_logging

UNIT_PRICE = 25
"""The price of one token the work reports, in atomic units."""


class TokenCountingExecutor(AgentExecutor):
    """The text-stats skill, reporting `tokens` tokens on its usage meter before it answers."""

    def __init__(self, tokens: int) -> None:
        self._tokens = tokens
        self._skill = TextStatsExecutor()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Report the usage, then answer as the text-stats skill does."""
        usage_meter(context).add("tokens", quantity=self._tokens, unit_price=UNIT_PRICE)
        await self._skill.execute(context, event_queue)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel as the text-stats skill does."""
        await self._skill.cancel(context, event_queue)


def main() -> None:
    """Serve the merchant until SIGTERM (or SIGKILL)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, required=True, help="the tokens each paid turn reports using")
    tokens = parser.parse_args().tokens
    settings = cli.load_settings(MerchantSettings)
    listener = cli.bind_listener(settings.host, settings.port)
    with listener:
        checked = asyncio.run(check_merchant(settings))
        configure_logging(cli.load_settings(LogSettings))
        refuse_on_fatal(checked)
        config = uvicorn.Config(
            build_app(settings, delegate=TokenCountingExecutor(tokens)),
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_keep_alive=KEEP_ALIVE_S,
            http=cli.bounded_http_protocol(header_limits(settings)),
        )
        cli.Server(config, name="metered merchant").run(sockets=[listener])


if __name__ == "__main__":
    main()
