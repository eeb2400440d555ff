"""The facilitator's door: who is calling `/verify` and `/settle`, and whether their key's rules allow it.

A caller presents `Authorization: Bearer <API key>`. Without a key, or with one that is not a live key of
this facilitator, the request is refused, unless the facilitator is public (`X402_FACILITATOR_PUBLIC`): then
a caller without a key is let in, while a wrong or revoked key is still refused (a caller that meant to
authenticate learns its key does not work instead of silently losing its namespace).

Every caller's idempotency keys live in a namespace of its own, so no caller can reach another's claim by
its key: an API key's id, or, for a public caller, the payer of the payment itself, whose signature the
settlement requires: a stranger can claim a key only for payments it can sign.

Wrong keys are counted per client network (`observability.FailureThrottle`): past its limit a client's
next wrong key is refused 429 with `Retry-After` instead of 401, while a right key is still let in from
there (a caller sharing the address cannot lock the key's owner out). A request without any key is no
guess, and is not counted.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from a2a_x402.observability import FailureThrottle

from ._api_keys import ApiKey, ApiKeyStore
from .wire import PaymentPayload, PaymentRequirements, Permit2PaymentPayload, Reason, payer_of

__all__ = ["Caller", "Door", "Refused"]

MAX_AUTHORIZATION_CHARS = 256
"""An Authorization header longer than this is refused unread (no key of this facilitator is as long)."""
_WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class Refused:
    """Why the door did not open: the HTTP status, the x402 reason and one line for the caller."""

    status: int
    reason: Reason
    message: str
    kind: str = "rule"
    """Which refusal, for the metric: `no_key`, `bad_header`, `unknown_key`, `throttled`, `pay_to`,
    `asset`, `min_amount` or `rate`."""
    retry_after_s: int | None = None
    """The `Retry-After` of a 429, when it has one."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: their key (None for a public caller)."""

    key: ApiKey | None

    def namespace(self, payload: PaymentPayload | Permit2PaymentPayload) -> str:
        """The namespace of this caller's idempotency keys for `payload`."""
        if self.key is not None:
            return f"key:{self.key.id}"
        return f"public:{payer_of(payload).lower()}"

    @property
    def name(self) -> str:
        """The key's id, or `public` (for logs and metrics; never the key)."""
        return "public" if self.key is None else self.key.id


# The refusals of a credential presented: what a guesser gets, and so what the throttle counts.
_GUESSES = ("bad_header", "unknown_key")
_FACILITATOR_KEYS = "facilitator-keys"
_NO_KEY = (
    "this facilitator requires an API key: send Authorization: Bearer <key> "
    "(an operator creates one with `x402-facilitator keys create`)"
)


@dataclass
class Door:
    """Admits callers by API key (`store`), or also without one when `public`; wrong keys are counted per
    client network by `throttle`; each refusal is told to `on_refused` (its `kind`), for the metric."""

    store: ApiKeyStore
    public: bool = False
    on_refused: Callable[[str], None] | None = None
    throttle: FailureThrottle = field(default_factory=FailureThrottle)
    _settles: dict[str, deque[float]] = field(default_factory=dict)

    async def admit(self, authorization: str | None, address: str = "") -> Caller | Refused:
        """The caller behind an `Authorization` header value (None when absent) sent from the client
        `address`."""
        answer = await self._admit(authorization)
        if isinstance(answer, Refused) and answer.kind in _GUESSES:
            seconds = self.throttle.failed(_FACILITATOR_KEYS, address)
            if seconds is not None:
                answer = Refused(
                    429,
                    Reason.INVALID_PAYLOAD,
                    f"too many wrong API keys from this address: try again in {seconds} s",
                    "throttled",
                    retry_after_s=seconds,
                )
        if isinstance(answer, Refused):
            self._told(answer)
        return answer

    def check_rules(
        self, caller: Caller, requirements: PaymentRequirements, *, settling: bool
    ) -> Refused | None:
        """The refusal of a payment the caller's key does not allow, or None; a settle that passes is
        counted towards the key's rate."""
        refused = self._check_rules(caller, requirements, settling=settling)
        if refused is not None:
            self._told(refused)
        return refused

    def _told(self, refused: Refused) -> None:
        if self.on_refused is not None:
            self.on_refused(refused.kind)

    async def _admit(self, authorization: str | None) -> Caller | Refused:
        if authorization is None or authorization == "":
            return Caller(None) if self.public else Refused(401, Reason.INVALID_PAYLOAD, _NO_KEY, "no_key")
        if len(authorization) > MAX_AUTHORIZATION_CHARS:
            return Refused(401, Reason.INVALID_PAYLOAD, "the Authorization header is too long", "bad_header")
        scheme, _, key = authorization.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            must = "the Authorization header must be: Bearer <API key>"
            return Refused(401, Reason.INVALID_PAYLOAD, must, "bad_header")
        found = await self.store.recognise(key.strip())
        if found is None:
            return Refused(401, Reason.INVALID_PAYLOAD, "this API key is unknown or revoked", "unknown_key")
        return Caller(found)

    def _check_rules(
        self, caller: Caller, requirements: PaymentRequirements, *, settling: bool
    ) -> Refused | None:
        if caller.key is None:
            return None
        rules = caller.key.rules
        if rules.pay_to and requirements.pay_to.lower() not in rules.pay_to:
            return Refused(
                200,
                Reason.INVALID_EXACT_EVM_PAYLOAD_RECIPIENT_MISMATCH,
                "this API key may not settle payments to this payTo",
                "pay_to",
            )
        if rules.assets and requirements.asset.lower() not in rules.assets:
            return Refused(
                200,
                Reason.INVALID_PAYMENT_REQUIREMENTS,
                "this API key may not settle payments in this asset",
                "asset",
            )
        if requirements.amount < rules.min_amount:
            return Refused(
                200,
                Reason.INVALID_PAYMENT_REQUIREMENTS,
                f"this API key settles payments of at least {rules.min_amount} atomic units",
                "min_amount",
            )
        if settling and rules.settles_per_minute is not None:
            return self._count_settle(caller.key, rules.settles_per_minute)
        return None

    def _count_settle(self, key: ApiKey, limit: int) -> Refused | None:
        """Count one settle of `key` in its sliding minute (of this process), or refuse it past `limit`."""
        now = time.monotonic()
        window = self._settles.setdefault(key.id, deque())
        while window and window[0] <= now - _WINDOW_S:
            window.popleft()
        if len(window) >= limit:
            return Refused(
                429,
                Reason.UNEXPECTED_SETTLE_ERROR,
                f"this API key may settle at most {limit} payments a minute; retry later",
                "rate",
            )
        window.append(now)
        return None
