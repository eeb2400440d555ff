"""A paying client with a spending policy: it pays a merchant's price up to a cap, and refuses above it.

`Payer.connect` reads the merchant's Agent Card (which pins the token and who is paid); `pay` sends the
request, and when the merchant answers with its x402 terms, `PaymentPolicy` decides whether to sign them.
Above `max_amount_atomic` nothing is signed: the task is declined and `AmountOverLimitError` says why. Under
it, the payer signs an EIP-3009 authorization, the merchant settles it on chain and the answer comes back
with the settlement's transaction.

The key is `X402_PAYER_KEY`, else the first of `X402_PAYER_KEYS` (what `x402-devchain --export` sets). It
is never printed. With the agent of two_tenants.py at port 8002 (examples/README.md has every step):

    eval "$(x402-devchain --export)"
    python examples/paying_client.py http://127.0.0.1:8002 "one two three" --max-amount 20000
    python examples/paying_client.py http://127.0.0.1:8002 "one two three" --skill reverse --max-amount 20000

The first is paid (count-words costs 10000, under the cap: exit status 0); the second is refused (reverse
costs 50000: exit status 1, nothing signed, nothing paid).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from a2a.helpers import new_text_message
from a2a.types import Message, Role

from a2a_x402.observability import LogSettingsError, configure_tool_logging, redact_values
from a2a_x402.payer import PaidResult, Payer, PayerError, PaymentPolicy, PaymentRefusedError


def payer_key() -> str | None:
    """The payer's private key from the environment, if it holds one."""
    key = os.environ.get("X402_PAYER_KEY") or os.environ.get("X402_PAYER_KEYS", "").split(",")[0]
    return key.strip() or None


def request(text: str, skill: str | None) -> Message:
    """The user message: `text`, naming `skill` in its metadata when one is asked for."""
    message = new_text_message(text, role=Role.ROLE_USER)
    if skill is not None:
        message.metadata.update({"skill": skill})
    return message


async def pay(card_url: str, message: Message, *, key: str, policy: PaymentPolicy, tenant: str) -> PaidResult:
    """Pay for `message` at the merchant of `card_url`, if its price is one `policy` agrees to."""
    async with Payer.connect(card_url, key, policy=policy, tenant=tenant) as payer:
        return await payer.pay(message)


def main(argv: list[str] | None = None) -> int:
    """Pay for one request; print the answer (exit 0), or why it was refused or failed (exit 1)."""
    parser = argparse.ArgumentParser(description="Pay an A2A agent for one request, up to a cap.")
    parser.add_argument("card_url", help="the merchant's URL (its Agent Card is found there)")
    parser.add_argument("text", help="what to send")
    parser.add_argument("--max-amount", type=int, required=True, help="the cap, in the token's atomic units")
    parser.add_argument("--skill", help="the skill to ask for (the message's metadata names it)")
    parser.add_argument("--tenant", default="", help="the merchant's tenant (default: its default tenant)")
    args = parser.parse_args(argv)
    key = payer_key()
    if key is None:
        print('error: no key: set X402_PAYER_KEY (or run eval "$(x402-devchain --export)")', file=sys.stderr)
        return 2
    try:
        # Warnings only (an unsigned card is one); the key is masked in any line that would quote it.
        configure_tool_logging(logging.WARNING)
        redact_values([key])
        # The spending policy: at most this much per payment (it may also pin networks and tokens).
        policy = PaymentPolicy(max_amount_atomic=args.max_amount)
        result = asyncio.run(
            pay(args.card_url, request(args.text, args.skill), key=key, policy=policy, tenant=args.tenant)
        )
    except PaymentRefusedError as exc:
        # The policy said no: nothing was signed, so nothing can have moved on chain.
        print(f"refused by the policy ({exc.code}): {exc}")
        return 1
    except PayerError as exc:
        print(f"not paid ({exc.code}): {exc}{' (a payment was signed)' if exc.signed else ''}")
        return 1
    except (LogSettingsError, ValueError) as exc:  # ValueError: a cap below 0, or a key that is not one
        print(f"error: {exc}", file=sys.stderr)
        return 2
    answer = " ".join(part.text for artifact in result.artifacts for part in artifact.parts if part.text)
    if result.paid is not None:
        print(f"paid {result.paid.amount} to {result.paid.pay_to} in transaction {result.transaction}")
    print(f"task {result.task_id}: {answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
