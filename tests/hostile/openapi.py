"""OpenAPI 3.0 descriptions, written for the fuzzers, of the facilitator API and the merchant's A2A surface.

Neither app describes its bodies: the facilitator's handlers read raw bytes, and the a2a-sdk routes parse
ProtoJSON themselves. These documents describe the wire forms closely (x402 v1 and v2 bodies, A2A 1.0
HTTP+JSON and JSON-RPC requests with the x402 extension's metadata, the billing API), so that schemathesis
generates requests that get past the first checks (positive mode) as well as near misses (negative mode).
Values that must match real state (addresses, networks, task ids, tenants, tokens) are offered as `enum`s
of the live values alongside free strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from a2a_x402.extension import EXTENSION_URI

__all__ = ["facilitator_document", "merchant_document"]

Schema = dict[str, Any]

_HEX = "^0x[0-9a-fA-F]*$"


def _either(values: Sequence[Any], fallback: Schema) -> Schema:
    """One of the live `values`, or anything matching `fallback`."""
    return {"anyOf": [{"enum": list(values)}, fallback]} if values else fallback


def _object(properties: dict[str, Schema], required: Sequence[str] = ()) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def x402_schemas(*, addresses: Sequence[str], networks: Sequence[str], v1_networks: Sequence[str]) -> Schema:
    """`components.schemas` for the x402 documents, naming the live `addresses` and networks."""
    # Live values only: a random mixed-case address fails its checksum and a random network is unknown, so
    # positive mode would never get past the parser. Negative mode still sends every other kind of string.
    address = {"enum": list(addresses)}
    uint256 = {"type": "string", "pattern": "^(0|[1-9][0-9]{0,76})$"}
    timestamp = {"type": "string", "pattern": "^(0|[1-9][0-9]{0,9})$"}
    extra = {
        "type": "object",
        "properties": {"name": {"enum": ["USDC", "DevUSDC"]}, "version": {"enum": ["2", "1"]}},
    }
    requirements_v2 = _object(
        {
            "scheme": {"enum": ["exact", "upto"]},
            "network": {"enum": list(networks)},
            "asset": {"$ref": "#/components/schemas/Address"},
            "amount": {"$ref": "#/components/schemas/Uint256"},
            "payTo": {"$ref": "#/components/schemas/Address"},
            "maxTimeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 31536000},
            "extra": extra,
        },
        ["scheme", "network", "asset", "amount", "payTo", "maxTimeoutSeconds"],
    )
    requirements_v1 = _object(
        {
            "scheme": {"enum": ["exact"]},
            "network": {"enum": list(v1_networks)},
            "maxAmountRequired": {"$ref": "#/components/schemas/Uint256"},
            "resource": {"type": "string", "format": "uri"},
            "description": {"type": "string", "maxLength": 40},
            "mimeType": {"type": "string", "maxLength": 40},
            "payTo": {"$ref": "#/components/schemas/Address"},
            "maxTimeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 31536000},
            "asset": {"$ref": "#/components/schemas/Address"},
            "extra": extra,
        },
        [
            "scheme",
            "network",
            "maxAmountRequired",
            "resource",
            "description",
            "payTo",
            "maxTimeoutSeconds",
            "asset",
        ],
    )
    authorization = _object(
        {
            "from": {"$ref": "#/components/schemas/Address"},
            "to": {"$ref": "#/components/schemas/Address"},
            "value": {"$ref": "#/components/schemas/Uint256"},
            "validAfter": timestamp,
            "validBefore": timestamp,
            "nonce": {"type": "string", "pattern": "^0x[0-9a-f]{64}$"},
        },
        ["from", "to", "value", "validAfter", "validBefore", "nonce"],
    )
    exact = _object(
        {
            "authorization": authorization,
            "signature": {"type": "string", "pattern": "^0x([0-9a-f]{2}){65}$"},
        },
        ["authorization", "signature"],
    )
    resource = _object(
        {"url": {"type": "string", "format": "uri"}, "description": {"type": "string", "maxLength": 40}},
        ["url"],
    )
    payload_v2 = _object(
        {
            "x402Version": {"enum": [2]},
            "payload": exact,
            "accepted": {"$ref": "#/components/schemas/RequirementsV2"},
            "resource": resource,
            "extensions": {
                "type": "object",
                "properties": {
                    "payment-identifier": {
                        "type": "object",
                        "properties": {"info": {"type": "object", "properties": {"id": {"type": "string"}}}},
                    }
                },
            },
        },
        ["x402Version", "payload", "accepted"],
    )
    payload_v1 = _object(
        {
            "x402Version": {"enum": [1]},
            "scheme": {"enum": ["exact"]},
            "network": {"enum": list(v1_networks)},
            "payload": exact,
        },
        ["x402Version", "scheme", "network", "payload"],
    )
    return {
        "Address": address,
        "Uint256": uint256,
        "RequirementsV2": requirements_v2,
        "RequirementsV1": requirements_v1,
        "PayloadV2": payload_v2,
        "PayloadV1": payload_v1,
        "PaymentRequiredV2": _object(
            {
                "x402Version": {"enum": [2]},
                "resource": resource,
                "accepts": {
                    "type": "array",
                    "items": {"$ref": "#/components/schemas/RequirementsV2"},
                    "minItems": 1,
                    "maxItems": 2,
                },
            },
            ["x402Version", "resource", "accepts"],
        ),
        "FacilitatorRequest": {
            "oneOf": [
                _object(
                    {
                        "x402Version": {"enum": [2]},
                        "paymentPayload": {"$ref": "#/components/schemas/PayloadV2"},
                        "paymentRequirements": {"$ref": "#/components/schemas/RequirementsV2"},
                    },
                    ["x402Version", "paymentPayload", "paymentRequirements"],
                ),
                _object(
                    {
                        "x402Version": {"enum": [1]},
                        "paymentPayload": {"$ref": "#/components/schemas/PayloadV1"},
                        "paymentRequirements": {"$ref": "#/components/schemas/RequirementsV1"},
                    },
                    ["x402Version", "paymentPayload", "paymentRequirements"],
                ),
            ]
        },
    }


def _json_body(schema: Schema, examples: Mapping[str, Any] | None = None) -> Schema:
    media: Schema = {"schema": schema}
    if examples:
        media["examples"] = {name: {"value": value} for name, value in examples.items()}
    return {"required": True, "content": {"application/json": media}}


def _new_task_message(text: str) -> Schema:
    """A message a client starts a task with: what the generated draws rarely are (about 2 % of them)."""
    return {"messageId": f"example-{text.split()[0].lower()}", "role": "ROLE_USER", "parts": [{"text": text}]}


_NEW_TASK_TEXTS = ("Quick brown fox.", "Sleeping dog. Lazy dog.")
"""One text per explicit example of a send: each starts a task waiting for payment, by construction."""


_ANSWERS: Schema = {"default": {"description": "any answer"}}


def facilitator_document(
    *, addresses: Sequence[str], networks: Sequence[str], v1_networks: Sequence[str]
) -> Schema:
    """The facilitator API: POST /verify, /settle, /settle/status; GET /supported, /healthz, /readyz,
    /metrics."""
    request = _json_body({"$ref": "#/components/schemas/FacilitatorRequest"})
    idempotency_key = {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "maxLength": 300},
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "x402 facilitator (as fuzzed)", "version": "1"},
        "paths": {
            "/verify": {"post": {"operationId": "verify", "requestBody": request, "responses": _ANSWERS}},
            "/settle": {
                "post": {
                    "operationId": "settle",
                    "parameters": [idempotency_key],
                    "requestBody": request,
                    "responses": _ANSWERS,
                }
            },
            "/settle/status": {
                "post": {"operationId": "settleStatus", "requestBody": request, "responses": _ANSWERS}
            },
            "/supported": {"get": {"operationId": "supported", "responses": _ANSWERS}},
            "/healthz": {"get": {"operationId": "healthz", "responses": _ANSWERS}},
            "/readyz": {"get": {"operationId": "readyz", "responses": _ANSWERS}},
            "/metrics": {"get": {"operationId": "metrics", "responses": _ANSWERS}},
        },
        "components": {
            "schemas": x402_schemas(addresses=addresses, networks=networks, v1_networks=v1_networks)
        },
    }


def _a2a_schemas(
    task_ids: Sequence[str], finished_task_ids: Sequence[str], context_ids: Sequence[str]
) -> Schema:
    task_id = _either(task_ids, {"type": "string", "maxLength": 40})
    context_id = _either(context_ids, {"type": "string", "maxLength": 40})
    extension_value = {
        "oneOf": [
            _object(
                {
                    "status": {"enum": ["payment-submitted"]},
                    "payload": {"$ref": "#/components/schemas/PayloadV2"},
                },
                ["status", "payload"],
            ),
            _object({"status": {"enum": ["payment-rejected"]}}, ["status"]),
            _object(
                {
                    "status": {"enum": ["payment-required"]},
                    "required": {"$ref": "#/components/schemas/PaymentRequiredV2"},
                },
                ["status", "required"],
            ),
            {"type": "object", "properties": {"status": {"type": "string"}}},
        ]
    }
    part = {
        "oneOf": [
            _object({"text": {"type": "string", "maxLength": 60}, "metadata": {"type": "object"}}, ["text"]),
            _object({"data": {}, "mediaType": {"type": "string"}}, ["data"]),
            _object(
                {
                    "url": {"type": "string", "format": "uri"},
                    "filename": {"type": "string"},
                    "mediaType": {"type": "string"},
                },
                ["url"],
            ),
            _object({"raw": {"type": "string", "format": "byte"}, "mediaType": {"type": "string"}}, ["raw"]),
        ]
    }
    message = _object(
        {
            "messageId": {"type": "string", "maxLength": 40},
            "role": {"enum": ["ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED"]},
            "parts": {"type": "array", "items": part, "maxItems": 3},
            "taskId": task_id,
            "contextId": context_id,
            "metadata": {
                "type": "object",
                "properties": {
                    EXTENSION_URI: extension_value,
                    "x402.payment.status": {"type": "string"},
                },
            },
            "extensions": {
                "type": "array",
                "items": _either([EXTENSION_URI], {"type": "string"}),
                "maxItems": 2,
            },
            "referenceTaskIds": {"type": "array", "items": task_id, "maxItems": 2},
        },
        ["messageId", "role", "parts"],
    )
    configuration = _object(
        {
            "acceptedOutputModes": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "historyLength": {"type": "integer"},
            "returnImmediately": {"type": "boolean"},
        }
    )
    return {
        "Message": message,
        "SendMessageRequest": _object(
            {
                "message": message,
                "configuration": configuration,
                "metadata": {"type": "object"},
                "tenant": {"type": "string"},
            },
            ["message"],
        ),
        "TaskId": task_id,
        # A subscription to a task that is still running stays open; only finished tasks end it at once.
        "FinishedTaskId": _either(finished_task_ids, {"type": "string", "maxLength": 40}),
        "ContextId": context_id,
    }


def _path_id(name: str, schema: Schema) -> Schema:
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _rest_operations(prefix: str, extra_parameters: list[Schema], label: str) -> dict[str, Schema]:
    task = _path_id("id", {"$ref": "#/components/schemas/TaskId"})
    finished_task = _path_id("id", {"$ref": "#/components/schemas/FinishedTaskId"})
    send = _json_body(
        {"$ref": "#/components/schemas/SendMessageRequest"},
        {f"new-task-{n}": {"message": _new_task_message(text)} for n, text in enumerate(_NEW_TASK_TEXTS)},
    )
    history = {"name": "historyLength", "in": "query", "required": False, "schema": {"type": "integer"}}
    list_query = [
        {
            "name": "contextId",
            "in": "query",
            "required": False,
            "schema": {"$ref": "#/components/schemas/ContextId"},
        },
        {
            "name": "status",
            "in": "query",
            "required": False,
            "schema": {
                "enum": ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED", "TASK_STATE_UNSPECIFIED"]
            },
        },
        {"name": "pageSize", "in": "query", "required": False, "schema": {"type": "integer"}},
        {"name": "pageToken", "in": "query", "required": False, "schema": {"type": "string"}},
        history,
        {"name": "includeArtifacts", "in": "query", "required": False, "schema": {"type": "boolean"}},
    ]

    def operation(name: str, parameters: list[Schema], body: Schema | None = None) -> Schema:
        spec: Schema = {
            "operationId": f"{label}{name}",
            "parameters": extra_parameters + parameters,
            "responses": _ANSWERS,
        }
        if body is not None:
            spec["requestBody"] = body
        return spec

    push = _json_body(
        _object(
            {
                "url": {"type": "string", "format": "uri"},
                "token": {"type": "string"},
                "id": {"type": "string"},
            }
        )
    )
    return {
        f"{prefix}/message:send": {"post": operation("SendMessage", [], send)},
        f"{prefix}/message:stream": {"post": operation("SendStreamingMessage", [], send)},
        f"{prefix}/tasks": {"get": operation("ListTasks", list_query)},
        f"{prefix}/tasks/{{id}}": {"get": operation("GetTask", [task, history])},
        f"{prefix}/tasks/{{id}}:cancel": {"post": operation("CancelTask", [task])},
        f"{prefix}/tasks/{{id}}:subscribe": {
            "get": operation("SubscribeToTask", [finished_task]),
            "post": operation("SubscribeToTaskPost", [finished_task]),
        },
        f"{prefix}/tasks/{{id}}/pushNotificationConfigs": {
            "post": operation("CreatePushConfig", [task], push),
            "get": operation("ListPushConfigs", [task]),
        },
        f"{prefix}/extendedAgentCard": {"get": operation("GetExtendedAgentCard", [])},
    }


def _jsonrpc_request(tenants: Sequence[str]) -> Schema:
    tenant = _either(tenants, {"type": "string"})
    task_params = _object({"id": {"$ref": "#/components/schemas/TaskId"}, "tenant": tenant}, ["id"])
    finished_task_params = _object(
        {"id": {"$ref": "#/components/schemas/FinishedTaskId"}, "tenant": tenant}, ["id"]
    )

    def call(method: str, params: Schema) -> Schema:
        return _object(
            {
                "jsonrpc": {"enum": ["2.0"]},
                "id": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 10}]},
                "method": {"enum": [method]},
                "params": params,
            },
            ["jsonrpc", "id", "method", "params"],
        )

    send_params = {
        "allOf": [
            {"$ref": "#/components/schemas/SendMessageRequest"},
            {"type": "object", "properties": {"tenant": tenant}},
        ]
    }
    return {
        "oneOf": [
            call("SendMessage", send_params),
            call("SendStreamingMessage", send_params),
            call("GetTask", task_params),
            call("CancelTask", task_params),
            call("SubscribeToTask", finished_task_params),
            call(
                "ListTasks",
                _object({"tenant": tenant, "contextId": {"$ref": "#/components/schemas/ContextId"}}),
            ),
            call("GetExtendedAgentCard", _object({"tenant": tenant})),
            call(
                "CreateTaskPushNotificationConfig",
                _object({"taskId": {"$ref": "#/components/schemas/TaskId"}}),
            ),
        ]
    }


def _jsonrpc_examples(task_ids: Sequence[str]) -> dict[str, Any]:
    """A new task sent and streamed, and a live task read: requests the JSON-RPC handlers answer."""
    examples: dict[str, Any] = {}
    for method in ("SendMessage", "SendStreamingMessage"):
        for n, text in enumerate(_NEW_TASK_TEXTS):
            message = _new_task_message(text)
            message["messageId"] += f"-{method}"
            examples[f"{method}-{n}"] = {
                "jsonrpc": "2.0",
                "id": n + 1,
                "method": method,
                "params": {"message": message},
            }
    for n, task_id in enumerate(task_ids[:1]):
        examples[f"GetTask-{n}"] = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    return examples


def _billing_operations(tenants: Sequence[str], tokens: Sequence[str], event_ids: Sequence[str]) -> Schema:
    tenant = _path_id("tenant", _either(tenants, {"type": "string"}))
    authorization = {
        "name": "Authorization",
        "in": "header",
        "required": False,
        "schema": _either([f"Bearer {token}" for token in tokens], {"type": "string", "maxLength": 60}),
    }
    statement_query = [
        {"name": "format", "in": "query", "required": False, "schema": {"enum": ["json", "csv"]}},
        {
            "name": "since",
            "in": "query",
            "required": False,
            "schema": {"type": "string", "format": "date-time"},
        },
        {
            "name": "until",
            "in": "query",
            "required": False,
            "schema": {"type": "string", "format": "date-time"},
        },
    ]
    events_query = [
        {"name": "since_sequence", "in": "query", "required": False, "schema": {"type": "integer"}},
        {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer"}},
    ]

    def operation(name: str, parameters: list[Schema]) -> Schema:
        return {
            "operationId": name,
            "parameters": [tenant, authorization, *parameters],
            "responses": _ANSWERS,
        }

    return {
        "/tenants/{tenant}/ledger/balance": {
            "get": operation(
                "LedgerBalance",
                [{"name": "asset", "in": "query", "required": False, "schema": {"type": "string"}}],
            )
        },
        "/tenants/{tenant}/ledger/statement": {"get": operation("LedgerStatement", statement_query)},
        "/tenants/{tenant}/webhooks/events": {"get": operation("WebhookEvents", events_query)},
        "/tenants/{tenant}/webhooks/events/{event_id}/redeliver": {
            "post": operation(
                "RedeliverEvent", [_path_id("event_id", _either(event_ids, {"type": "string"}))]
            )
        },
    }


def merchant_document(
    *,
    tenants: Sequence[str],
    tokens: Sequence[str],
    task_ids: Sequence[str],
    finished_task_ids: Sequence[str],
    context_ids: Sequence[str],
    event_ids: Sequence[str],
    addresses: Sequence[str],
    networks: Sequence[str],
) -> Schema:
    """The merchant's A2A 1.0 surface (HTTP+JSON for the default tenant and in tenant form, JSON-RPC) and
    its billing API, naming the live tenants, tokens, tasks, contexts, webhook events and addresses.

    `task_ids` may be named by any operation; subscriptions name only `finished_task_ids` (and random ids).
    """
    named_tenants = [tenant for tenant in tenants if tenant]
    tenant_parameter = _path_id("tenant", _either(named_tenants, {"type": "string", "minLength": 1}))
    if named_tenants:
        # The tenant the explicit examples (see `_json_body`) are sent to.
        tenant_parameter["example"] = named_tenants[0]
    paths: Schema = {
        **_rest_operations("/a2a/rest", [], "Rest"),
        **_rest_operations("/a2a/rest/{tenant}", [tenant_parameter], "RestTenant"),
        "/a2a/jsonrpc": {
            "post": {
                "operationId": "JsonRpc",
                "requestBody": _json_body(_jsonrpc_request(tenants), _jsonrpc_examples(task_ids)),
                "responses": _ANSWERS,
            }
        },
        **_billing_operations(tenants, tokens, event_ids),
    }
    schemas = {
        # No x402 v1 on A2A 1.0: the v1 schemas are there but unused.
        **x402_schemas(addresses=addresses, networks=networks, v1_networks=["base-sepolia"]),
        **_a2a_schemas(task_ids, finished_task_ids, context_ids),
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "x402 merchant (as fuzzed)", "version": "1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }
