"""A client for a remote facilitator's HTTP API, interchangeable with the in-process `Facilitator`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import httpx
import orjson

from a2a_x402.observability import failure_reason, unreachable_reason

from ._errors import ChainUnavailableError, FacilitatorAnswerError, IdempotencyConflictError
from .wire import (
    PaymentPayload,
    PaymentRequirements,
    Permit2PaymentPayload,
    SettleResponse,
    SupportedKind,
    SupportedResponse,
    VerifyResponse,
    WireError,
)

__all__ = ["FacilitatorClient", "HttpFacilitatorClient"]


class FacilitatorClient(Protocol):
    """What a merchant needs from a facilitator, wherever it runs.

    A payment is an EIP-3009 `exact` one (`PaymentPayload`) or a Permit2 witness transfer (`exact` by Permit2,
    or `upto`, whose settle `requirements` may ask for less than the signed maximum).
    """

    async def verify(
        self, payload: PaymentPayload | Permit2PaymentPayload, requirements: PaymentRequirements
    ) -> VerifyResponse:
        """Check a payment without changing anything."""
        ...

    async def settle(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        *,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
        presented_at: int | None = None,
    ) -> SettleResponse:
        """Settle a payment at most once; `presented_at` is when the caller took it (unix seconds)."""
        ...

    async def settlement_status(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        *,
        timeout_s: float = 0.0,
    ) -> SettleResponse | None:
        """The settlement answer for a payment, or None if it was never presented."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class HttpFacilitatorClient:
    """Talks x402 v2 to a facilitator at `base_url`, presenting `api_key` (`Authorization: Bearer`) if given.

    An answer is what the facilitator said when it is an x402 answer, whatever its status (a refusal at
    its door, 401, or of its rate, 429, is a settle or verify failure: nothing was claimed). A reused
    idempotency key (409) raises IdempotencyConflictError. No connection raises ChainUnavailableError, a
    5xx or a body that is no x402 answer its FacilitatorAnswerError: either way the outcome is not known
    (the caller asks `settlement_status`, retries with the same idempotency key or leaves it to recovery).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
    ):
        # The key travels in a default header only: it is never part of a URL, an error or a log line.
        headers = {"authorization": f"Bearer {api_key}"} if api_key else None
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport, headers=headers
        )

    async def verify(
        self, payload: PaymentPayload | Permit2PaymentPayload, requirements: PaymentRequirements
    ) -> VerifyResponse:
        """POST /verify."""
        answer = await self._post("/verify", payload, requirements, None)
        return _read(VerifyResponse.from_wire, answer)

    async def settle(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        *,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
        presented_at: int | None = None,
    ) -> SettleResponse:
        """POST /settle with an `Idempotency-Key` header when given.

        `presented_at` is not sent: the HTTP API takes no caller's word for when a payment was taken, so a
        payment someone else already settled is refused there (naming their transaction), never counted.
        """
        headers = {"idempotency-key": idempotency_key} if idempotency_key else None
        answer = await self._post("/settle", payload, requirements, headers)
        return _read(SettleResponse.from_wire, answer)

    async def settlement_status(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        *,
        timeout_s: float = 0.0,
    ) -> SettleResponse | None:
        """POST /settle/status; None when the facilitator never saw the payment."""
        answer = await self._post("/settle/status", payload, requirements, None, allow_not_found=True)
        return None if answer is None else _read(SettleResponse.from_wire, answer)

    async def supported(self) -> SupportedResponse:
        """GET /supported, without the kinds this package cannot read.

        The x402 SDKs' facilitators list x402 v1 kinds for every network name their release knows, some of
        which this package does not: such a kind is left out rather than voiding the whole answer.
        """
        try:
            response = await self._http.get("/supported")
        except httpx.HTTPError as exc:
            raise ChainUnavailableError(f"facilitator unreachable: {unreachable_reason(exc)}") from exc
        body = orjson.loads(response.content)
        if isinstance(body, dict) and isinstance(body.get("kinds"), list):
            body = {**body, "kinds": [kind for kind in body["kinds"] if _readable_kind(kind)]}
        return SupportedResponse.from_wire(body)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _post(
        self,
        path: str,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        headers: dict[str, str] | None,
        *,
        allow_not_found: bool = False,
    ) -> object:
        body = {
            "x402Version": 2,
            "paymentPayload": payload.to_json_dict(),
            "paymentRequirements": requirements.to_json_dict(),
        }
        # Without the media type, facilitators that let their framework parse the body (the SDK's FastAPI
        # example) read it as a string and refuse it.
        headers = {"content-type": "application/json", **(headers or {})}
        try:
            response = await self._http.post(path, content=orjson.dumps(body), headers=headers)
        except httpx.HTTPError as exc:
            # In words (`connection refused`): the operator reads it, and "ConnectError: …" says less.
            raise ChainUnavailableError(f"facilitator unreachable: {unreachable_reason(exc)}") from exc
        if response.status_code == 404 and allow_not_found:
            return None
        if response.status_code == 409:
            raise IdempotencyConflictError(_shown(response.text))
        if response.status_code not in _ANSWERED:
            raise FacilitatorAnswerError(
                f"facilitator answered HTTP {response.status_code}: {_shown(response.text)}"
            )
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise FacilitatorAnswerError(
                f"facilitator answered HTTP {response.status_code} with a body that is not JSON"
            ) from None


# The statuses whose body is the facilitator's x402 answer: a payment refused at the door (401), for its
# rate (429) or as unreadable (400) is answered, like any verify or settle failure, with nothing claimed.
_ANSWERED = frozenset({200, 400, 401, 429})
_SHOWN_CHARS = 200
T = TypeVar("T")


def _shown(text: str) -> str:
    """A facilitator's body as an error may quote it: one line, bounded."""
    return " ".join(text.split())[:_SHOWN_CHARS]


def _read(parse: Callable[[object], T], answer: object) -> T:
    """`answer` as an x402 document, or ChainUnavailableError: a body of another shape says nothing about
    the payment (the outcome is unknown, as if the facilitator had not answered)."""
    try:
        return parse(answer)
    except (ValueError, TypeError) as exc:
        raise FacilitatorAnswerError(
            f"facilitator answered something that is not an x402 answer: {failure_reason(exc)}"
        ) from None


def _readable_kind(kind: object) -> bool:
    try:
        SupportedKind.from_wire(kind)
    except WireError:
        return False
    return True
