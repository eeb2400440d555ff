"""The literal mapping between the two wire dialects, as data.

Each row pairs what is written on the wire by extension v0.2 on A2A 0.3 (with x402 v1 values)
with what is written by extension v0.3 on A2A 1.0 (with x402 v2 values). The table is the source
of the specification's migration section, so every literal is spelled exactly as it travels.
``None`` on one side means that side has no counterpart; a parenthesised text describes a
behaviour rather than a literal (the end of a stream has no bytes of its own).

The network rows are the EVM networks that have an x402 v1 name, taken from ``facilitator.wire``
so that the table and the parser cannot disagree; this project settles on EVM chains only.

What is *not* in the table is unchanged between the dialects: the six payment status values,
the seven error codes, and the shapes of the x402 ``payload`` (EIP-3009 ``signature`` and
``authorization``) and of receipts apart from the rows below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from a2a_x402.facilitator.wire import V1_NETWORK_CHAIN_IDS, caip2_from_chain_id

from ._uris import EXTENSION_URI, EXTENSION_URI_V01, EXTENSION_URI_V02

__all__ = ["LITERAL_MAPPINGS", "LiteralCategory", "LiteralMapping", "literal_map"]


class LiteralCategory(StrEnum):
    """The groups of the mapping table, in the order the specification presents them."""

    EXTENSION_URI = "extension-uri"
    HEADER = "header"
    JSONRPC_METHOD = "jsonrpc-method"
    REQUEST_FIELD = "request-field"
    ERROR = "error"
    AGENT_CARD = "agent-card"
    TASK_STATE = "task-state"
    ROLE = "role"
    PART = "part"
    KIND = "kind"
    STREAM_EVENT = "stream-event"
    STREAM_END = "stream-end"
    METADATA = "metadata"
    X402_FIELD = "x402-field"
    NETWORK = "network"


@dataclass(frozen=True, slots=True)
class LiteralMapping:
    """One row of the table.

    Attributes:
        category: the group the row belongs to.
        v02: the literal on A2A 0.3 with extension v0.2 (x402 v1), or ``None`` if it has none.
        v03: the literal on A2A 1.0 with extension v0.3 (x402 v2), or ``None`` if it has none.
        note: what a reader needs to apply the row correctly; empty when the row says it all.
    """

    category: LiteralCategory
    v02: str | None
    v03: str | None
    note: str = ""


def _rows(
    category: LiteralCategory, *pairs: tuple[str | None, str | None, str]
) -> tuple[LiteralMapping, ...]:
    return tuple(LiteralMapping(category, v02, v03, note) for v02, v03, note in pairs)


def _ext(field: str) -> tuple[str, str, str]:
    """A metadata row: the flat v0.2 key and the member of the v0.3 object holding the same value."""
    return f'metadata["x402.payment.{field}"]', f'metadata["{EXTENSION_URI}"]["{field}"]', ""


LITERAL_MAPPINGS: tuple[LiteralMapping, ...] = (
    *_rows(
        LiteralCategory.EXTENSION_URI,
        (
            EXTENSION_URI_V02,
            EXTENSION_URI,
            "in AgentCard capabilities.extensions[].uri and in the activation header",
        ),
        (EXTENSION_URI_V01, None, "accepted as v0.2 on A2A 0.3 interfaces only; never on A2A 1.0"),
    ),
    *_rows(
        LiteralCategory.HEADER,
        (
            f"X-A2A-Extensions: {EXTENSION_URI_V02}",
            f"A2A-Extensions: {EXTENSION_URI}",
            "comma-separated list of the extension URIs the client activates",
        ),
        ("A2A-Version: 0.3", "A2A-Version: 1.0", "0.3 clients usually omit the header; absent means 0.3"),
    ),
    *_rows(
        LiteralCategory.JSONRPC_METHOD,
        ("message/send", "SendMessage", "carries payment-submitted and payment-rejected"),
        ("message/stream", "SendStreamingMessage", ""),
        ("tasks/get", "GetTask", ""),
        ("tasks/cancel", "CancelTask", ""),
        ("tasks/resubscribe", "SubscribeToTask", ""),
        ("tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig", ""),
        ("tasks/pushNotificationConfig/get", "GetTaskPushNotificationConfig", ""),
        ("tasks/pushNotificationConfig/list", "ListTaskPushNotificationConfigs", ""),
        ("tasks/pushNotificationConfig/delete", "DeleteTaskPushNotificationConfig", ""),
        ("agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard", ""),
    ),
    *_rows(
        LiteralCategory.REQUEST_FIELD,
        (
            '"configuration": {"blocking": true}',
            '"configuration": {"returnImmediately": false}',
            "inverted; waiting is the 1.0 default, so the member is usually left out",
        ),
        (
            '"configuration": {"blocking": false}',
            '"configuration": {"returnImmediately": true}',
            "inverted; the answer is the task as soon as it exists",
        ),
    ),
    *_rows(
        LiteralCategory.ERROR,
        (
            '"error": {"code": -32008, "message": "…"}',
            '"error": {"code": -32008, "message": "…", '
            '"data": [{…, "reason": "EXTENSION_SUPPORT_REQUIRED"}]}',
            "ExtensionSupportRequiredError; A2A 0.3 defines no code for it, so -32008 is a server-defined "
            "code there (the a2a-sdk's 0.3 client reads it as this error)",
        ),
        (
            '"error": {"code": …, "message": "…", "data": …}',
            '"error": {"code": …, "message": "…", '
            '"data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", …}]}',
            "1.0 adds an ErrorInfo with the A2A reason (e.g. EXTENSION_SUPPORT_REQUIRED) "
            "and domain a2a-protocol.org",
        ),
    ),
    *_rows(
        LiteralCategory.AGENT_CARD,
        (
            '"url": "…", "preferredTransport": "JSONRPC"',
            '"supportedInterfaces": '
            '[{"url": "…", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}, …]',
            "the preferred interface is the first one listed",
        ),
        (
            '"additionalInterfaces": [{"url": "…", "transport": "HTTP+JSON"}]',
            '"supportedInterfaces": [{"url": "…", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]',
            "the transport names (JSONRPC, GRPC, HTTP+JSON) do not change",
        ),
        (
            '"protocolVersion": "0.3.0"',
            '"supportedInterfaces": [{…, "protocolVersion": "1.0"}]',
            "per interface instead of per card",
        ),
        (
            '"url": "https://merchant.example/t/acme/a2a/jsonrpc"',
            '"supportedInterfaces": [{…, "tenant": "acme"}]',
            "the tenant an interface serves: new in 1.0 requests; a 0.3 request names none, so a tenant's "
            "0.3 interfaces have URLs of their own and a card of their own (§12.1)",
        ),
        (
            '"supportsAuthenticatedExtendedCard": true',
            '"capabilities": {"extendedAgentCard": true}',
            "",
        ),
        (
            '"signatures": [{"protected": "…", "signature": "…"}]',
            '"signatures": [{"protected": "…", "signature": "…"}]',
            "same JWS form, over the 1.0 JSON (A2A 1.0 §8.4); "
            "a 0.3 card's signature does not cover its 1.0 form",
        ),
    ),
    *_rows(
        LiteralCategory.TASK_STATE,
        ("submitted", "TASK_STATE_SUBMITTED", ""),
        ("working", "TASK_STATE_WORKING", "payment-verified rides with this state"),
        ("input-required", "TASK_STATE_INPUT_REQUIRED", "payment-required rides with this state"),
        ("completed", "TASK_STATE_COMPLETED", "payment-completed rides with this state"),
        ("canceled", "TASK_STATE_CANCELED", ""),
        ("failed", "TASK_STATE_FAILED", "a terminal payment-failed rides with this state"),
        ("rejected", "TASK_STATE_REJECTED", ""),
        ("auth-required", "TASK_STATE_AUTH_REQUIRED", ""),
        ("unknown", "TASK_STATE_UNSPECIFIED", ""),
    ),
    *_rows(
        LiteralCategory.ROLE,
        ("user", "ROLE_USER", "client to agent"),
        ("agent", "ROLE_AGENT", "agent to client"),
    ),
    *_rows(
        LiteralCategory.PART,
        ('{"kind": "text", "text": "…"}', '{"text": "…"}', ""),
        (
            '{"kind": "data", "data": {…}}',
            '{"data": {…}}',
            "1.0 allows any JSON value as data; 0.3 only an object",
        ),
        (
            '{"kind": "file", "file": {"bytes": "<base64>", "mimeType": "…", "name": "…"}}',
            '{"raw": "<base64>", "mediaType": "…", "filename": "…"}',
            "",
        ),
        (
            '{"kind": "file", "file": {"uri": "…", "mimeType": "…", "name": "…"}}',
            '{"url": "…", "mediaType": "…", "filename": "…"}',
            "mimeType becomes mediaType on A2A objects only, never inside x402 values",
        ),
    ),
    *_rows(
        LiteralCategory.KIND,
        (
            '{"kind": "task", …}',
            '{"task": {…}}',
            "a SendMessage result or stream event is wrapped in its oneof member; nested objects drop kind",
        ),
        ('{"kind": "message", …}', '{"message": {…}}', "also dropped on status.message and history entries"),
    ),
    *_rows(
        LiteralCategory.STREAM_EVENT,
        ('{"kind": "status-update", …}', '{"statusUpdate": {…}}', ""),
        ('{"kind": "artifact-update", …}', '{"artifactUpdate": {…}}', ""),
    ),
    *_rows(
        LiteralCategory.STREAM_END,
        (
            '"final": true',
            "(the server closes the stream after this event)",
            "1.0 removed the flag; the stream ends after a terminal or interrupted state",
        ),
        ('"final": false', None, "1.0 removed the flag"),
    ),
    *_rows(
        LiteralCategory.METADATA,
        _ext("status"),
        _ext("required"),
        _ext("payload"),
        _ext("receipts"),
        _ext("error"),
        (
            f'"extensions": ["{EXTENSION_URI_V02}"]',
            f'"extensions": ["{EXTENSION_URI}"]',
            "on a Message or Artifact that carries extension data",
        ),
    ),
    *_rows(
        LiteralCategory.X402_FIELD,
        ('"x402Version": 1', '"x402Version": 2', "in PaymentRequired and PaymentPayload"),
        (
            "PaymentRequirements.maxAmountRequired",
            "PaymentRequirements.amount",
            "atomic units as a decimal string",
        ),
        ("PaymentRequirements.resource", "PaymentRequired.resource.url", "moves from each option to the top"),
        (
            "PaymentRequirements.description",
            "PaymentRequired.resource.description",
            "moves to the top; required in v1, optional in v2",
        ),
        (
            "PaymentRequirements.mimeType",
            "PaymentRequired.resource.mimeType",
            "moves to the top; v1 clients require it (the x402 0.2 models), optional in v2",
        ),
        ("PaymentRequirements.outputSchema", None, "no x402 v2 field"),
        (
            "PaymentRequirements.network",
            "PaymentRequirements.network",
            "legacy name becomes CAIP-2; see networks",
        ),
        ("PaymentRequired.error", "PaymentRequired.error", "required by the v1 spec, optional in v2"),
        ("PaymentPayload.scheme", "PaymentPayload.accepted.scheme", ""),
        ("PaymentPayload.network", "PaymentPayload.accepted.network", "CAIP-2 in v2"),
        (None, "PaymentPayload.accepted", "the complete PaymentRequirements the client chose"),
        (None, "PaymentPayload.resource", "optional"),
        (None, "PaymentRequired.extensions", "optional; echoed in PaymentPayload.extensions"),
        (
            "SettleResponse.transaction",
            "SettleResponse.transaction",
            'optional in v1; required in v2, "" if nothing was sent',
        ),
        ("SettleResponse.network", "SettleResponse.network", "CAIP-2 in v2"),
        (
            "SettleResponse.payer",
            "SettleResponse.payer",
            "optional in v2; receipts of this extension SHOULD carry it",
        ),
        (None, "SettleResponse.amount", "new, optional: the atomic amount settled, as a decimal string"),
        (None, "SettleResponse.extensions", "new, optional: facilitator-specific data (§6.3)"),
    ),
    *_rows(
        LiteralCategory.NETWORK,
        *((name, caip2_from_chain_id(chain_id), "") for name, chain_id in V1_NETWORK_CHAIN_IDS.items()),
    ),
)
"""Every row of the v0.2-on-A2A-0.3 ↔ v0.3-on-A2A-1.0 mapping, grouped by category."""


def literal_map(category: LiteralCategory) -> Mapping[str, str]:
    """Return the rows of ``category`` that have both sides, as v0.2 literal → v0.3 literal.

    For example ``literal_map(LiteralCategory.NETWORK)["base"] == "eip155:8453"``.
    """
    return MappingProxyType(
        {
            row.v02: row.v03
            for row in LITERAL_MAPPINGS
            if row.category is category and row.v02 is not None and row.v03 is not None
        }
    )
