"""`x402-merchant serve` at `X402_LOG_LEVEL=DEBUG` writes no secret and no payment signature (issue 25).

A real merchant process (in-process facilitator, so the settlement's logs are in the same file) with a
named tenant whose webhook endpoint is a real receiver: paid tasks of two tenants, refused payments, the
webhook deliveries, the dashboard's log-in form, bearer tokens right and wrong, the billing API, log-out.
Then no 8-character piece of the relayer key, an API token, a caller API key (made by `callers create` at
DEBUG; used right and wrong), the webhook secret, a session cookie or any
payment's signature is anywhere in the log; the log did record the requests (DEBUG is on).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import httpx

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ApiKeyStore
from a2a_x402.merchant.dashboard import SESSION_COOKIE
from a2a_x402.merchant.edge import JSONRPC_PATH
from a2a_x402.merchant.webhooks import generate_secret
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.faults.processes import merchant_processes
from tests.fixtures.commands import assert_no_secret, run_command
from tests.fixtures.deadlines import wait_until
from tests.fixtures.facilitator_processes import facilitator_processes
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    MerchantWire,
    offered_terms,
    payment_message,
)
from tests.merchant.webhooks.receiver import HOOK_PATH, Receiver

from .payments.flows import offer


async def test_debug_logs_hold_no_secret_and_no_signature(
    chain: DevChain, sqlite_url: str, tmp_path: Path, asgi_server: Callable[..., str]
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
        env={"X402_DATABASE_URL": sqlite_url, "X402_LOG_LEVEL": "DEBUG"},
    )
    assert created.returncode == 0, created.stderr
    caller_key = created.stdout.splitlines()[-1]
    answers = [created.stderr]
    with merchant_processes(chain, sqlite_url, tmp_path) as processes:
        merchant = await processes.start(
            log_level="DEBUG", access_log="true", tenants_file=tenants_file, webhooks_allow_private="true"
        )
        default_token = merchant.env["X402_API_TOKEN"]
        async with merchant.http() as http:
            for tenant in ("", "acme"):
                wire = MerchantWire(http, "jsonrpc", tenant)
                for payer in (chain.new_payer(), chain.new_payer(1)):  # one pays, one cannot
                    task = await offer(wire)
                    [terms] = offered_terms(task).accepts
                    payload = sign_payment(payer, terms)
                    signatures.append(payload.payload.signature)
                    await wire.send(payment_message(task["id"], payload))
            statuses: list[int] = []
            for presented in (caller_key, caller_key[:-6] + "AAAAAA"):
                headers = {**http.headers, "authorization": f"Bearer {presented}"}
                async with httpx.AsyncClient(base_url=merchant.base_url, headers=headers) as keyed:
                    answer = await keyed.post(JSONRPC_PATH, json=_get_task_request())
                    statuses.append(answer.status_code)
                    answers.append(answer.text + str(answer.headers))
        await wait_until(lambda: bool(receiver.received), what="a webhook delivery", timeout_s=30)
        sessions = await _use_the_dashboard_and_billing(merchant.base_url, acme_token)
        merchant.stop()
    text = merchant.log_path.read_text()

    assert statuses == [200, 401]  # the right key authenticates, a wrong one is refused
    assert " DEBUG " in text and "/tenants/acme/dashboard/login" in text  # DEBUG was on, requests logged
    known = {"relayer key": chain.relayer_key.removeprefix("0x"), "default API token": default_token}
    known |= {"acme API token": acme_token, "webhook secret": secret.removeprefix("whsec_")}
    known |= {f"session {n}": session for n, session in enumerate(sessions)}
    known |= {f"signature {n}": signature.removeprefix("0x") for n, signature in enumerate(signatures)}
    known |= {"caller API key": caller_key.rsplit("_", 1)[-1]}
    assert_no_secret([text, *answers], known)


def _get_task_request() -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}


async def _use_the_dashboard_and_billing(base_url: str, token: str) -> list[str]:
    """Log in (wrong, then right), read pages and the billing API with a bearer, log out; the sessions."""
    async with httpx.AsyncClient(base_url=base_url) as http:
        await http.post("/tenants/acme/dashboard/login", data={"token": token[::-1]})
        login = await http.post("/tenants/acme/dashboard/login", data={"token": token})
        session = login.cookies[SESSION_COOKIE]
        assert (await http.get("/tenants/acme/dashboard")).status_code == 200
        bearer = {"authorization": f"Bearer {token}"}
        assert (await http.get("/tenants/acme/ledger/balance", headers=bearer)).status_code == 200
        assert (await http.get("/tenants/acme/webhooks/events", headers=bearer)).status_code == 200
        await http.get("/tenants/acme/ledger/balance", headers={"authorization": f"Bearer {token[:-1]}"})
        assert (await http.post("/tenants/acme/dashboard/logout")).status_code == 303
    return [session]


async def test_the_facilitator_key_the_merchant_presents_is_in_no_log_at_debug(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    engine = create_engine(sqlite_url)
    try:
        _record, key = await ApiKeyStore(engine).create("merchant")
    finally:
        await engine.dispose()
    async with facilitator_processes(chain, tmp_path) as facilitators:
        remote = await facilitators.serve(
            sqlite_url, X402_FACILITATOR_PUBLIC="false", X402_LOG_LEVEL="DEBUG", X402_ACCESS_LOG="true"
        )
        with merchant_processes(chain, sqlite_url, tmp_path) as processes:
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
