"""The paid word counter of paid_agent.py, settling through a facilitator that runs as a service of its own.

By default a merchant verifies and settles in process, with a relayer key of its own. Here
`X402_FACILITATOR_URL` points it at an x402 facilitator over HTTP (`x402-facilitator serve`, or anyone's),
which holds the relayer keys and pays the gas; the merchant presents its API key there
(`X402_FACILITATOR_API_KEY`) and still books only what the chain's receipt shows, read through its own node
(`X402_RPC_URL`). See docs/guides/remote-facilitator.md.

Before serving it runs the checks `x402-merchant serve` runs (`check_merchant`): among them, whether the
facilitator answers, settles on this network and takes this merchant's key. A fatal problem stops it in one
line; the others are logged as warnings.

Run it on the dev chain, with the facilitator in another terminal (examples/README.md has every step):

    eval "$(x402-devchain --export)"
    export X402_PAY_TO=0x14dC79964da2C08b23698B3D3cc7Ca32193d9955
    export X402_FACILITATOR_URL=http://127.0.0.1:4022
    export X402_FACILITATOR_API_KEY=$(cat .facilitator-key)
    python examples/remote_facilitator.py --port 8003
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import uvicorn
from paid_agent import COUNT_WORDS, PRICE, WordCounter

from a2a_x402.cli import ConfigError, load_settings
from a2a_x402.facilitator import refuse_on_fatal
from a2a_x402.merchant import MerchantSettings, PaidAppError, paid_app
from a2a_x402.merchant.checks import check_merchant
from a2a_x402.observability import LogSettingsError, configure_logging
from a2a_x402.storage import upgrade_schema


async def prepared(settings: MerchantSettings) -> None:
    """Migrate the merchant's tables, then refuse to go on if a check fails fatally.

    Raises:
        ConfigError: a fatal check, named with what it found (one line).
    """
    # Only the merchant's own tables: the facilitator's claim store is in the facilitator's database.
    await upgrade_schema(settings.database_url, "merchant")
    refuse_on_fatal(await check_merchant(settings, skills=[COUNT_WORDS]))


def main(argv: list[str] | None = None) -> int:
    """Serve the word counter settling remotely until Ctrl-C; a mistake is one line and exit status 2."""
    parser = argparse.ArgumentParser(description="A paid agent settling through a remote x402 facilitator.")
    parser.add_argument("--port", type=int, help="the port to serve on (default: X402_PORT, else 8000)")
    args = parser.parse_args(argv)
    try:
        configure_logging()
        settings = load_settings(MerchantSettings, **({} if args.port is None else {"port": args.port}))
        # Without a facilitator URL the merchant would quietly settle in process: not what this shows.
        if settings.facilitator_url is None:
            raise ConfigError(
                "X402_FACILITATOR_URL is not set: point it at the facilitator (x402-facilitator serve)"
            )
        asyncio.run(prepared(settings))
        app = paid_app(
            WordCounter(),
            name="Word counter",
            description="Counts the words of your text, 0.01 USDC a time, settled by a remote facilitator.",
            skills=[COUNT_WORDS],
            prices={COUNT_WORDS.id: PRICE},
            settings=settings,
        )
    except (ConfigError, LogSettingsError, PaidAppError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=None, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
