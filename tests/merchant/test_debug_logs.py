"""`x402-merchant serve` at `X402_LOG_LEVEL=DEBUG` writes no secret and no payment signature (issue 25).

A real merchant process (in-process facilitator, so the settlement's logs are in the same file) on SQLite
and on PostgreSQL, serving JSON-RPC, HTTP+JSON and gRPC, with a named tenant whose webhook endpoint is a real
receiver: paid tasks of two tenants on every binding, refused payments, the webhook deliveries, a caller API
key (made by `callers create` at DEBUG) used right and wrong on every binding, the dashboard's log-in form,
bearer tokens right and wrong, the billing API (its limits changed too), log-out. Then no 8-character piece
of the relayer key, an API token, the caller API key, the webhook secret, a session cookie or any payment's
signature is anywhere in the log (nor, inside a long hex run, the first 16 hex digits of one); the log did
record the requests (DEBUG is on). The same for Permit2 payments of the EIP-2612 token, `exact` and `upto`,
each by the allowance and by an EIP-2612 permit (`eip2612GasSponsoring`): neither the Permit2 signature nor
the permit's, nor the permit's r or s apart.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from a2a_x402.devchain import PERMIT_ASSET_NAME, PERMIT_ASSET_VERSION, DevChain
from a2a_x402.facilitator import ApiKeyStore
from a2a_x402.merchant.dashboard import SESSION_COOKIE
from a2a_x402.merchant.edge import JSONRPC_PATH
from a2a_x402.merchant.webhooks import generate_secret
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.facilitator.permit2_chain import funded_payer, sdk_sign
from tests.faults.processes import merchant_processes
from tests.fixtures.commands import assert_no_secret, run_command
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.facilitator_processes import facilitator_processes
from tests.fixtures.merchant import (
    BINDINGS,
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    A2ACallError,
    MerchantWire,
    offered_terms,
    payment_message,
)
from tests.fixtures.servers import free_port
from tests.merchant.webhooks.receiver import HOOK_PATH, Receiver

from .payments.flows import offer


async def test_debug_logs_hold_no_secret_and_no_signature(
    chain: DevChain, database_url: str, tmp_path: Path, asgi_server: Callable[..., str]
) -> None:
    secret = generate_secret()
    receiver = Receiver([secret])
    hook_url = asgi_server(receiver.app) + HOOK_PATH
    acme_token = secrets.token_urlsafe(24)
    acme_pay_to, acme_price = TWO_TENANTS["acme"]
    tenants_file = tmp_path / "tenants.toml"
    tenants_file.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = {DEFAULT_PRICE}\n\n'
        f'[tenants.acme]\npay_to = "{acme_pay_to}"\nprice = {acme_price}\napi_token = "{acme_token}"\n\n'
        f'[[tenants.acme.webhooks]]\nurl = "{hook_url}"\nsecret = "{secret}"\n'
    )
    signatures: list[str] = []
    # A caller API key, made at DEBUG: its create output is the only place it may ever appear.
    created = await run_command(
        ["x402-merchant", "callers", "create", "alice"],
        cwd=tmp_path,
        env={"X402_DATABASE_URL": database_url, "X402_LOG_LEVEL": "DEBUG"},
    )
    assert created.returncode == 0, created.stderr
    caller_key = created.stdout.splitlines()[-1]
    answers = [created.stderr]
    with merchant_processes(chain, database_url, tmp_path) as processes:
        merchant = await processes.start(
            log_level="DEBUG",
            access_log="true",
            tenants_file=tenants_file,
            webhooks_allow_private="true",
            grpc_port=free_port(),
        )
        default_token = merchant.env["X402_API_TOKEN"]
        async with merchant.http() as http:
            for binding in BINDINGS:
                for tenant in ("", "acme"):
                    wire = MerchantWire(http, binding, tenant)
                    for payer in (chain.new_payer(), chain.new_payer(1)):  # one pays, one cannot
                        task = await offer(wire)
                        [terms] = offered_terms(task).accepts
                        payload = sign_payment(payer, terms)
                        signatures.append(payload.payload.signature)
                        await wire.send(payment_message(task["id"], payload))
            refusals = {
                binding: [
                    await _get_task_as(merchant.base_url, http, binding, presented)
                    for presented in (caller_key, caller_key[:-6] + "AAAAAA")
                ]
                for binding in BINDINGS
            }
        await wait_until(lambda: bool(receiver.received), what="a webhook delivery")
        sessions = await _use_the_dashboard_and_billing(merchant.base_url, acme_token)
        merchant.stop()
    text = merchant.log_path.read_text()

    # The right key authenticates (the task is not found), a wrong one is refused, on every binding.
    assert refusals == {
        "jsonrpc": ["TASK_NOT_FOUND", "401"],
        "rest": ["TASK_NOT_FOUND", "401"],
        "grpc": ["TASK_NOT_FOUND", "UNAUTHENTICATED"],
    }
    assert " DEBUG " in text and "/tenants/acme/dashboard/login" in text  # DEBUG was on, requests logged
    assert "message:send" in text  # HTTP+JSON was logged too
    # Every binding's paid turns ran (gRPC has no access log): one booked, one refused per binding and tenant.
    assert text.count("booked settlement") == text.count("refused: INSUFFICIENT_FUNDS") == 2 * len(BINDINGS)
    known = {"relayer key": chain.relayer_key.removeprefix("0x"), "default API token": default_token}
    known |= {"acme API token": acme_token, "webhook secret": secret.removeprefix("whsec_")}
    known |= {f"session {n}": session for n, session in enumerate(sessions)}
    known |= {f"signature {n}": signature.removeprefix("0x") for n, signature in enumerate(signatures)}
    known |= {"caller API key": caller_key.rsplit("_", 1)[-1]}
    assert len(signatures) == 4 * len(BINDINGS)
    assert_no_secret([text, *answers], known)
    for signature in signatures:
        assert signature.removeprefix("0x")[:16].lower() not in text.lower()


async def _get_task_as(base_url: str, http: httpx.AsyncClient, binding: str, key: str) -> str:
    """GetTask of no task with the caller API key `key` on `binding`: the error's reason, or the status of
    a refused credential (HTTP, or gRPC's name)."""
    headers = {**http.headers, "authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url, headers=headers) as keyed:
        if binding == "jsonrpc":  # a refusal there is HTTP 401, not a JSON-RPC answer
            answer = await keyed.post(JSONRPC_PATH, json=_get_task_request())
            return "TASK_NOT_FOUND" if "TASK_NOT_FOUND" in answer.text else str(answer.status_code)
        try:
            await MerchantWire(keyed, binding).get_task("no-such-task")
        except A2ACallError as failure:
            return failure.reason or failure.grpc_status or str(failure.http_status)
    raise AssertionError("GetTask of no task succeeded")


def _get_task_request() -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}


async def _use_the_dashboard_and_billing(base_url: str, token: str) -> list[str]:
    """Log in (wrong, then right), read pages and the billing API with a bearer, log out; the sessions."""
    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as http:
        await http.post("/tenants/acme/dashboard/login", data={"token": token[::-1]})
        login = await http.post("/tenants/acme/dashboard/login", data={"token": token})
        session = login.cookies[SESSION_COOKIE]
        assert (await http.get("/tenants/acme/dashboard")).status_code == 200
        bearer = {"authorization": f"Bearer {token}"}
        assert (await http.get("/tenants/acme/ledger/balance", headers=bearer)).status_code == 200
        assert (await http.get("/tenants/acme/webhooks/events", headers=bearer)).status_code == 200
        changed = await http.put(
            "/tenants/acme/limits", json={"unpaid": {"maxAwaitingPerCaller": 5}}, headers=bearer
        )
        assert changed.status_code == 200
        await http.get("/tenants/acme/ledger/balance", headers={"authorization": f"Bearer {token[:-1]}"})
        assert (await http.post("/tenants/acme/dashboard/logout")).status_code == 303
    return [session]


async def test_the_facilitator_key_the_merchant_presents_is_in_no_log_at_debug(
    chain: DevChain, database_url: str, tmp_path: Path
) -> None:
    engine = create_engine(database_url)
    try:
        _record, key = await ApiKeyStore(engine).create("merchant")
    finally:
        await engine.dispose()
    async with facilitator_processes(chain, tmp_path) as facilitators:
        remote = await facilitators.serve(
            database_url, X402_FACILITATOR_PUBLIC="false", X402_LOG_LEVEL="DEBUG", X402_ACCESS_LOG="true"
        )
        with merchant_processes(chain, database_url, tmp_path) as processes:
            merchant = await processes.start(
                log_level="DEBUG", access_log="true", facilitator_url=remote.url, facilitator_api_key=key
            )
            async with merchant.http() as http:
                wire = MerchantWire(http, "jsonrpc")
                task = await offer(wire)
                [terms] = offered_terms(task).accepts
                paid = await wire.send(payment_message(task["id"], sign_payment(chain.new_payer(), terms)))
            merchant.stop()
        served = remote.log()
    text = merchant.log_path.read_text()

    assert paid["task"]["status"]["state"] == "TASK_STATE_COMPLETED", paid  # the key was presented
    assert JSONRPC_PATH in text and "/settle" in served  # both logged every request
    assert_no_secret([text, served], {"facilitator API key": key.rsplit("_", 1)[1]})


async def test_debug_logs_hold_no_permit2_or_eip2612_signature(
    chain: DevChain, database_url: str, tmp_path: Path
) -> None:
    tenants_file = tmp_path / "tenants.toml"
    acme_pay_to, _acme_price = TWO_TENANTS["acme"]
    tenants_file.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = {DEFAULT_PRICE}\n\n'
        f'[tenants.acme]\npay_to = "{acme_pay_to}"\nprice = {DEFAULT_PRICE}\n'
        f"[tenants.acme.metered_skills]\ntext-stats = {DEFAULT_PRICE}\n"
    )
    payments: list[dict[str, Any]] = []
    states: list[str] = []
    with merchant_processes(chain, database_url, tmp_path) as processes:
        # The EIP-2612 token: its terms are Permit2 (`exact` by Permit2 by default, `upto` for acme).
        merchant = await processes.start(
            log_level="DEBUG",
            access_log="true",
            tenants_file=tenants_file,
            asset=chain.permit_asset,
            asset_name=PERMIT_ASSET_NAME,
            asset_version=PERMIT_ASSET_VERSION,
        )
        async with merchant.http() as http:
            for tenant in ("", "acme"):
                wire = MerchantWire(http, "jsonrpc", tenant)
                for approved in (True, False):  # by the allowance, then by an EIP-2612 permit
                    task = await offer(wire)
                    [terms] = offered_terms(task).accepts
                    key = funded_payer(chain, chain.permit_asset, approved=approved)
                    payment = sdk_sign(chain, key, terms, eip2612=not approved)
                    payments.append(payment)
                    done = await wire.send(payment_message(task["id"], payment))
                    states.append(done["task"]["status"]["state"])
        merchant.stop()
    text = merchant.log_path.read_text()

    assert states == ["TASK_STATE_COMPLETED"] * 4
    assert [p["accepted"]["scheme"] for p in payments] == ["exact", "exact", "upto", "upto"]
    assert " DEBUG " in text and "booked settlement" in text  # DEBUG was on, the payments were settled
    signatures = {f"Permit2 signature {n}": p["payload"]["signature"] for n, p in enumerate(payments)}
    signatures |= {
        f"EIP-2612 signature {n}": p["extensions"]["eip2612GasSponsoring"]["info"]["signature"]
        for n, p in enumerate(payments)
        if "extensions" in p
    }
    assert len(signatures) == 6
    known = {name: signature.removeprefix("0x") for name, signature in signatures.items()}
    # Its r and s apart too, as a permit's (v, r, s) is handed to the token.
    known |= {f"{name} r": value[:64] for name, value in known.items()}
    known |= {f"{name} s": value[64:128] for name, value in known.items() if not name.endswith(" r")}
    assert_no_secret([text], known)
    for value in known.values():
        assert value[:16].lower() not in text.lower()
