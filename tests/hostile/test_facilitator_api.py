"""schemathesis against the facilitator's HTTP API on uvicorn, on the dev chain with a SQLite claim store.

Every request is generated: none carries a signature the payer made, so none can be a payment the
facilitator may settle. Hence, besides "never a 5xx", the property checked after every request is that
nothing changed: no settlement claim, the relayer's nonce and the payers' and payees' balances as they
were. Positive mode sends well-formed x402 v1 and v2 bodies naming the live token, payers and payees (they
reach verification on chain); negative mode sends bodies that break the schema.
"""

from __future__ import annotations

from collections.abc import Callable

from eth_account import Account
from schemathesis.core.transport import Response

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import FacilitatorSettings, create_app
from a2a_x402.facilitator.wire import v1_network_from_chain_id
from tests.fixtures.facilitator import PAY_TO

from .fuzzing import AnyCase, fuzz_operations
from .openapi import facilitator_document
from .state import Snapshot, changes, take_snapshot

_EXAMPLES_PER_OPERATION = 40


def test_generated_requests_never_get_a_server_error_nor_change_anything(
    chain: DevChain,
    sqlite_url: str,
    asgi_server: Callable[..., str],
    facilitator_settings: Callable[..., FacilitatorSettings],
) -> None:
    base_url = asgi_server(create_app(settings=facilitator_settings()))
    payers = [Account.from_key(key).address for key in chain.payer_keys]
    watched = [*payers, PAY_TO]
    document = facilitator_document(
        addresses=[chain.asset, PAY_TO, *payers],
        networks=[chain.network],
        v1_networks=[v1_network_from_chain_id(chain.chain_id)],
    )
    baseline: list[Snapshot] = [take_snapshot(sqlite_url, chain, watched)]

    def nothing_changed(case: AnyCase, response: Response) -> None:
        after = take_snapshot(sqlite_url, chain, watched)
        moved = changes(baseline[0], after)
        assert not moved, f"{case.operation.label} answered {response.status_code} and changed {moved}"

    statuses = fuzz_operations(
        document, base_url, max_examples=_EXAMPLES_PER_OPERATION, after=nothing_changed
    )

    # The run reached past the parser: well-formed bodies were verified (200, isValid false), broken ones
    # refused (400), unknown settlements not found (404).
    assert {200, 400, 404} <= set(statuses), statuses
    assert all(status < 500 for status in statuses), statuses
