"""The reference merchant's signed Agent Cards: served, fetched and verified over loopback.

Every merchant here is the real app (`build_app`) on uvicorn with a key directory (`card_keys_dir`), and
every verification fetches the JWK Set from the merchant itself through the `jku` of the card. The keys are
managed with `x402-merchant keys` as a subprocess where the CLI is the point, else with `KeyStore`.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard
from a2a.utils.signing import _canonicalize_agent_card, create_signature_verifier
from google.protobuf.json_format import ParseDict
from joserfc import jws
from joserfc.jws import JWSRegistry
from joserfc.registry import HeaderParameter

from a2a_x402.agentcard import (
    JWKS_PATH,
    CardReading,
    CardStatus,
    CardUnsignedError,
    CardVerificationError,
    CardVerifier,
    JwksCache,
    KeyStore,
    SignaturePolicy,
    VerificationResult,
    canonicalize_card,
    generate_signing_key,
    parse_jwks,
    read_card,
)
from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02
from a2a_x402.merchant.edge import AGENT_CARD_PATH, JSONRPC_PATH, REST_PATH
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    TWO_TENANTS,
    MerchantStarter,
    RunningMerchant,
    write_tenants_file,
)

CLI_BUDGET_S = 90
pytestmark = pytest.mark.timeout(2 * CLI_BUDGET_S)

# joserfc refuses header members it was not told of: this one names the reading a signature covers.
READING_REGISTRY = JWSRegistry(header_registry={"cardReading": HeaderParameter("card reading", "str")})

X402_MERCHANT = Path(sys.executable).with_name("x402-merchant")
VERSIONS = ("1.0", "0.3", None)
"""The cards served: each version's, and (None) the card for requests naming no version."""
OTHER_PAY_TO = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"  # anvil account 7


@dataclass(frozen=True)
class ServedCard:
    """One answer of the card route: the exact bytes, their JSON, and the entity tag."""

    body: bytes
    card: dict[str, Any]
    etag: str


async def fetch_card(http: httpx.AsyncClient, base_url: str, version: str | None) -> ServedCard:
    headers = {"A2A-Version": version} if version is not None else {}
    reply = await http.get(base_url + AGENT_CARD_PATH, headers=headers)
    assert reply.status_code == 200, reply.text
    return ServedCard(reply.content, reply.json(), reply.headers["etag"])


async def fetch_jwks(http: httpx.AsyncClient, base_url: str) -> dict[str, Any]:
    reply = await http.get(base_url + JWKS_PATH)
    assert reply.status_code == 200, reply.text
    jwks: dict[str, Any] = reply.json()
    return jwks


async def verify(
    http: httpx.AsyncClient,
    base_url: str,
    card: dict[str, Any],
    policy: SignaturePolicy = SignaturePolicy.REQUIRE,
) -> VerificationResult:
    """Our verifier as a payer runs it: keys only from the card's `jku`, fetched from the merchant."""
    verifier = CardVerifier(jwks=JwksCache(http, allow_insecure_localhost=True), policy=policy)
    return await verifier.verify(card, card_url=base_url + AGENT_CARD_PATH)


def protected_header(signature: dict[str, str]) -> dict[str, Any]:
    encoded = signature["protected"]
    header: dict[str, Any] = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    return header


def kids_of(card: dict[str, Any], *, with_reading: bool = False) -> list[Any]:
    """The kid of every signature, in card order; with `with_reading`, (`cardReading` or None, kid) pairs."""
    headers = [protected_header(signature) for signature in card["signatures"]]
    if with_reading:
        return [(header.get("cardReading"), header["kid"]) for header in headers]
    return [header["kid"] for header in headers]


def x402_pay_to(card: dict[str, Any], uri: str) -> list[dict[str, Any]]:
    extension = next(e for e in card["capabilities"]["extensions"] if e["uri"] == uri)
    entries: list[dict[str, Any]] = extension["params"]["payTo"]
    return entries


async def merchant_cli(*args: str, keys_dir: Path | None, cwd: Path, **env: str) -> tuple[int, str, str]:
    """Run `x402-merchant ARGS` with only the X402_* variables given; (status, stdout, stderr)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("X402_")}
    if keys_dir is not None:
        clean["X402_CARD_KEYS_DIR"] = str(keys_dir)
    process = await asyncio.create_subprocess_exec(
        str(X402_MERCHANT),
        *args,
        env={**clean, **env},
        cwd=cwd,  # no developer's .env is read
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        # A CLI start imports the whole merchant (about 2.5 s of CPU); a loaded two-core machine running
        # several at once can stretch that many times over, so the bound is for a hang, not for speed.
        out, err = await asyncio.wait_for(process.communicate(), timeout=CLI_BUDGET_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def serve_env(chain: DevChain, tmp_path: Path) -> dict[str, str]:
    """The X402_* settings `x402-merchant serve` needs on `chain`, card keys aside."""
    return {
        "X402_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/merchant.db",
        "X402_RPC_URL": chain.rpc_url,
        "X402_NETWORK": chain.network,
        "X402_ASSET": chain.asset,
        "X402_RELAYER_KEY": chain.relayer_key,
        "X402_PAY_TO": DEFAULT_PAY_TO,
        "X402_PORT": "0",
    }


def signing_merchant(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    tmp_path: Path,
    *,
    tenants: dict[str, tuple[str, int]] | None = None,
    **settings: Any,
) -> RunningMerchant:
    """A merchant signing its cards with one key generated in `tmp_path/keys`, serving `tenants` if given
    (`settings` as for `start_merchant`)."""
    KeyStore(tmp_path / "keys").generate()
    tenants_file = None if tenants is None else write_tenants_file(tmp_path / "tenants.toml", tenants)
    return start_merchant(
        sqlite_url, tenants_file=tenants_file, card_keys_dir=str(tmp_path / "keys"), **settings
    )


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
async def test_each_versions_card_is_signed_and_verifies_with_the_merchants_jwks(
    alg: str, start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    key = KeyStore(tmp_path / "keys").generate(alg)
    merchant = start_merchant(sqlite_url, card_keys_dir=str(tmp_path / "keys"))

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        served = {version: await fetch_card(http, merchant.base_url, version) for version in VERSIONS}
        results = {
            version: await verify(http, merchant.base_url, served[version].card) for version in VERSIONS
        }
        jwks = await fetch_jwks(http, merchant.base_url)

    header = {"alg": alg, "typ": "JOSE", "kid": key.kid, "jku": merchant.base_url + "/.well-known/jwks.json"}
    # Every card reads differently to a2a-sdk 1.x than to us: its canonical form drops the card's
    # `securityRequirements`, whose bearer schemes have no scopes (empty lists, which it removes). The 0.3 and
    # the versionless card also read differently to a2a-sdk 0.3 (tests/merchant/edge/test_card_interop.py).
    # One more signature for each SDK reading, tagged.
    tagged: dict[str | None, list[str]] = {"1.0": ["a2a-sdk-1"], "0.3": ["a2a-sdk-1", "a2a-sdk-0.3"]}
    tagged[None] = tagged["0.3"]
    for version in VERSIONS:
        headers = [protected_header(signature) for signature in served[version].card["signatures"]]
        assert headers == [header] + [{**header, "cardReading": reading} for reading in tagged[version]]
        result = results[version]
        assert (result.status, result.kid) == (CardStatus.VERIFIED, key.kid)
        assert [check.code for check in result.checks] == [None]
        assert [(c.index, c.reading, c.code) for c in result.others] == [
            (index, reading, "signature_other_reading") for index, reading in enumerate(tagged[version], 1)
        ]
    assert [(k["kid"], k["alg"], k["use"]) for k in jwks["keys"]] == [(key.kid, alg, "sig")]
    assert all("d" not in k for k in jwks["keys"])  # only public halves are published
    assert (
        protocol_version_of(served["0.3"].card) == "0.3" and protocol_version_of(served["1.0"].card) is None
    )
    # The card for requests naming no version is signed over both versions' members.
    assert protocol_version_of(served[None].card) == "0.3" and "supportedInterfaces" in served[None].card


def protocol_version_of(card: dict[str, Any]) -> str | None:
    """The 0.3 card's top-level `protocolVersion`; a 1.0 card has none (its interfaces carry it)."""
    version: str | None = card.get("protocolVersion")
    return version


async def test_the_signed_card_is_signed_once_and_cached_per_version(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    merchant = signing_merchant(start_merchant, sqlite_url, tmp_path)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        first = {version: await fetch_card(http, merchant.base_url, version) for version in VERSIONS}
        again = {version: await fetch_card(http, merchant.base_url, version) for version in VERSIONS}
        revalidated = await http.get(
            merchant.base_url + AGENT_CARD_PATH,
            headers={"A2A-Version": "1.0", "If-None-Match": first["1.0"].etag},
        )

    # ES256 signatures differ on every signing: equal bytes mean the card was signed once, not per request.
    for version in VERSIONS:
        assert (again[version].body, again[version].etag) == (first[version].body, first[version].etag)
    assert len({first[version].etag for version in VERSIONS}) == len(VERSIONS)
    assert first["1.0"].card["signatures"] != first["0.3"].card["signatures"]
    assert first[None].card["signatures"] not in (
        first["1.0"].card["signatures"],
        first["0.3"].card["signatures"],
    )
    assert (revalidated.status_code, revalidated.headers["etag"]) == (304, first["1.0"].etag)


async def test_the_served_bytes_minus_signatures_are_exactly_what_was_signed(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    # Without gRPC: two merchants cannot listen at one gRPC address, which both cards would list.
    signed = signing_merchant(start_merchant, sqlite_url, tmp_path, grpc_port=None)
    # The same merchant without keys, claiming the same URL: its card is the unsigned document.
    unsigned = start_merchant(sqlite_url, public_url=signed.base_url, grpc_port=None)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        for version in VERSIONS:
            served = await fetch_card(http, signed.base_url, version)
            plain = await fetch_card(http, unsigned.base_url, version)
            jwks = parse_jwks(await fetch_jwks(http, signed.base_url))

            # Byte for byte: the unsigned document with `signatures` appended, nothing re-serialised.
            signatures = json.dumps(served.card["signatures"], separators=(",", ":")).encode()
            assert served.body == plain.body[:-1] + b',"signatures":' + signatures + b"}"
            # Each JWS, checked by joserfc (not our verifier) over its reading of the unsigned bytes: ours,
            # the canonical form, for the first; an SDK's for one whose header names that reading.
            assert "cardReading" not in protected_header(served.card["signatures"][0])
            for signature in served.card["signatures"]:
                header = protected_header(signature)
                reading = CardReading(header.get("cardReading", "a2a"))
                payload = read_card(json.loads(plain.body), reading)
                assert payload is not None
                if reading is CardReading.A2A:
                    assert payload == canonicalize_card(json.loads(plain.body))
                encoded = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
                compact = f"{signature['protected']}.{encoded}.{signature['signature']}"
                checked = jws.deserialize_compact(
                    compact, jwks[header["kid"]].key, algorithms=[header["alg"]], registry=READING_REGISTRY
                )
                assert checked.payload == payload


@pytest.mark.parametrize(
    ("version", "uri"),
    [("1.0", EXTENSION_URI), ("0.3", EXTENSION_URI_V02), (None, EXTENSION_URI), (None, EXTENSION_URI_V02)],
)
async def test_a_card_whose_pay_to_was_changed_fails_verification(
    version: str | None, uri: str, start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    merchant = signing_merchant(start_merchant, sqlite_url, tmp_path)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        card = (await fetch_card(http, merchant.base_url, version)).card
        tampered = copy.deepcopy(card)
        [entry] = x402_pay_to(tampered, uri)
        assert entry["address"] == DEFAULT_PAY_TO
        entry["address"] = OTHER_PAY_TO
        warned = await verify(http, merchant.base_url, tampered, SignaturePolicy.WARN)
        with pytest.raises(CardVerificationError) as refused:
            await verify(http, merchant.base_url, tampered)
        stripped = {name: value for name, value in card.items() if name != "signatures"}
        with pytest.raises(CardUnsignedError):
            await verify(http, merchant.base_url, stripped)
        assert (await verify(http, merchant.base_url, card)).verified  # the untouched card still does

    assert (warned.status, warned.code) == (CardStatus.FAILED, "card_verification_failed")
    assert [check.code for check in warned.checks] == ["signature_mismatch"]
    assert refused.value.code == "card_verification_failed"


async def test_rotation_signs_with_both_keys_until_the_old_one_is_retired(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    status, out, err = await merchant_cli("keys", "generate", keys_dir=keys, cwd=tmp_path)
    assert status == 0, err
    assert out.startswith("generated ES256 key ")  # ES256 unless --alg says otherwise
    old = out.split()[-1]
    status, out, err = await merchant_cli("keys", "rotate", keys_dir=keys, cwd=tmp_path)
    assert status == 0, err
    new = out.split()[3]

    during = start_merchant(sqlite_url, card_keys_dir=str(keys))
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        rotating = {version: await fetch_card(http, during.base_url, version) for version in VERSIONS}
        checks = {
            version: await verify(http, during.base_url, rotating[version].card) for version in VERSIONS
        }
        jwks_during = await fetch_jwks(http, during.base_url)
    during.stop()

    status, out, err = await merchant_cli("keys", "retire", old, keys_dir=keys, cwd=tmp_path)
    assert (status, out) == (0, f"retired key {old}\n"), err
    after = start_merchant(sqlite_url, card_keys_dir=str(keys))
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        retired = {version: await fetch_card(http, after.base_url, version) for version in VERSIONS}
        results = {version: await verify(http, after.base_url, retired[version].card) for version in VERSIONS}
        jwks_after = await fetch_jwks(http, after.base_url)
    # A verifier holding only the current JWK Set: the retired key's signature no longer verifies.
    current_only = CardVerifier(trusted_keys=parse_jwks(jwks_after).values())
    old_card = await current_only.verify(rotating["1.0"].card)

    readings: dict[str | None, list[str | None]] = {
        "1.0": [None, "a2a-sdk-1"],
        "0.3": [None, "a2a-sdk-1", "a2a-sdk-0.3"],
    }
    readings[None] = readings["0.3"]
    for version in VERSIONS:
        # Both keys sign every reading, ours first: newest key first within each.
        expected = [(reading, kid) for reading in readings[version] for kid in (new, old)]
        assert kids_of(rotating[version].card, with_reading=True) == expected
        assert [(c.kid, c.code) for c in checks[version].checks] == [(new, None), (old, None)]
        assert [(c.reading, c.kid) for c in checks[version].others] == expected[2:]
        assert kids_of(retired[version].card, with_reading=True) == [(r, new) for r in readings[version]]
        assert (results[version].verified, results[version].kid) == (True, new)
    assert {k["kid"] for k in jwks_during["keys"]} == {new, old}
    assert [k["kid"] for k in jwks_after["keys"]] == [new]
    assert [(c.kid, c.code) for c in old_card.checks] == [(new, None), (old, "signature_key_not_found")]


@pytest.mark.timeout(4 * CLI_BUDGET_S)
async def test_the_keys_cli_lists_keys_and_refuses_what_would_leave_the_card_unsigned(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    old = KeyStore(keys).generate("EdDSA").kid
    new = KeyStore(keys).rotate().kid
    KeyStore(keys).retire(old)

    listing, last, unknown, unset = await asyncio.gather(
        merchant_cli("keys", "list", keys_dir=keys, cwd=tmp_path),
        merchant_cli("keys", "retire", new, keys_dir=keys, cwd=tmp_path),
        merchant_cli("keys", "retire", "no-such-kid", keys_dir=keys, cwd=tmp_path),
        merchant_cli("keys", "list", keys_dir=None, cwd=tmp_path),
    )

    assert listing[0] == 0, listing[2]
    assert [line.split()[:3] for line in listing[1].splitlines()] == [
        [new, "EdDSA", "active"],
        [old, "EdDSA", "retired"],
    ]
    assert last[0] == 2 and "x402-merchant: " in last[2] and "last active key" in last[2]
    assert unknown[0] == 2 and "x402-merchant: no key 'no-such-kid'" in unknown[2]
    assert unset[0] == 2 and "X402_CARD_KEYS_DIR is not set" in unset[2]
    assert all("Traceback" not in result[2] for result in (last, unknown, unset))
    assert [key.kid for key in KeyStore(keys).signing_keys()] == [new]  # still active, still signing


async def test_the_keys_cli_retires_a_key_whose_kid_starts_with_a_dash(tmp_path: Path) -> None:
    # A thumbprint starts with "-" one time in 64; CI once failed on `retire -hOy...` read as option -h.
    for attempt in range(2000):
        keys = tmp_path / f"keys{attempt}"
        dashed = KeyStore(keys).generate("EdDSA").kid
        if dashed.startswith("-"):
            break
    assert dashed.startswith("-")
    other = KeyStore(keys).rotate().kid

    status, out, err = await merchant_cli("keys", "retire", dashed, keys_dir=keys, cwd=tmp_path)

    assert (status, out) == (0, f"retired key {dashed}\n"), err
    assert [key.kid for key in KeyStore(keys).signing_keys()] == [other]


async def test_serve_refuses_to_start_without_an_active_signing_key(chain: DevChain, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    env = serve_env(chain, tmp_path)

    status, _out, err = await merchant_cli("serve", keys_dir=tmp_path / "empty", cwd=tmp_path, **env)

    assert status == 2 and err.startswith("x402-merchant: not starting: ")
    assert f"card signing: key_store_error: no active signing key in {tmp_path / 'empty'}" in err
    assert "x402-merchant keys generate" in err and "Traceback" not in err


ALL_TENANTS = {"": (DEFAULT_PAY_TO, 1), **TWO_TENANTS}


async def fetch_extended_cards(http: httpx.AsyncClient, tenant: str) -> dict[str, dict[str, Any]]:
    """`tenant`'s extended card as each 1.0 binding serves it (GetExtendedAgentCard)."""
    rpc = await http.post(
        JSONRPC_PATH,
        json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {"tenant": tenant}},
    )
    prefix = f"{REST_PATH}/{tenant}" if tenant else REST_PATH
    rest = await http.get(prefix + "/extendedAgentCard")
    assert rest.status_code == 200, rest.text
    return {"jsonrpc": rpc.json()["result"], "rest": rest.json()}


async def test_each_tenants_extended_card_is_signed_over_the_served_bytes(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    merchant = signing_merchant(start_merchant, sqlite_url, tmp_path, tenants=ALL_TENANTS)

    async with merchant.http() as http:
        public = {version: (await fetch_card(http, merchant.base_url, version)).card for version in VERSIONS}
        extended = {tenant: await fetch_extended_cards(http, tenant) for tenant in ALL_TENANTS}
        results = {
            (tenant, binding): await verify(http, merchant.base_url, card)
            for tenant, served in extended.items()
            for binding, card in served.items()
        }
        jwks = await fetch_jwks(http, merchant.base_url)

    assert public["1.0"]["capabilities"]["extendedAgentCard"] is True
    assert "supportsAuthenticatedExtendedCard" not in public["0.3"]  # the extended card is a 1.0 operation
    for tenant, (pay_to, _price) in ALL_TENANTS.items():
        served = extended[tenant]
        assert served["jsonrpc"] == served["rest"]  # one signed card, whichever binding serves it
        card = served["jsonrpc"]
        assert [results[tenant, binding].verified for binding in ("jsonrpc", "rest")] == [True, True]
        # The signature covers the served JSON minus `signatures`, members the SDK writes back included.
        unsigned = {key: value for key, value in card.items() if key != "signatures"}
        assert canonicalize_card(unsigned) == canonicalize_card(card)
        assert [entry["address"] for entry in x402_pay_to(card, EXTENSION_URI)] == [pay_to]
        assert {interface.get("tenant", "") for interface in card["supportedInterfaces"]} == {tenant}
        assert card["capabilities"]["extendedAgentCard"] is True
        create_signature_verifier(sdk_key_provider(jwks), ["ES256"])(ParseDict(card, AgentCard()))


async def test_a_tenant_never_gets_another_tenants_extended_card(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    merchant = signing_merchant(start_merchant, sqlite_url, tmp_path, tenants=ALL_TENANTS)

    async with merchant.http() as http:
        acme = (await fetch_extended_cards(http, "acme"))["jsonrpc"]
        globex = (await fetch_extended_cards(http, "globex"))["jsonrpc"]
        unknown_rpc = await http.post(
            JSONRPC_PATH,
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "GetExtendedAgentCard",
                "params": {"tenant": "nobody"},
            },
        )
        unknown_rest = await http.get(f"{REST_PATH}/nobody/extendedAgentCard")
    async with merchant.http(version="0.3") as http_0_3:
        legacy = await http_0_3.post(
            JSONRPC_PATH, json={"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}
        )

    acme_pay_to, globex_pay_to = TWO_TENANTS["acme"][0], TWO_TENANTS["globex"][0]
    assert acme_pay_to in json.dumps(acme) and globex_pay_to not in json.dumps(acme)
    assert globex_pay_to in json.dumps(globex) and acme_pay_to not in json.dumps(globex)
    assert DEFAULT_PAY_TO not in json.dumps(acme) + json.dumps(globex)
    unknown_error = unknown_rpc.json()["error"]
    assert unknown_error["code"] == -32602 and "nobody" in unknown_error["message"]
    assert unknown_rest.status_code == 400 and "nobody" in unknown_rest.text
    assert "result" not in legacy.json() and legacy.json()["error"]["code"] == -32004  # unsupported operation
    assert "A2A 1.0 only" in legacy.json()["error"]["message"]


def sdk_key_provider(jwks: dict[str, Any]) -> Callable[[str | None, str | None], bytes]:
    """The SDK verifier's key lookup, answering from the merchant's published JWK Set."""
    keys = parse_jwks(jwks)

    def provide(kid: str | None, _jku: str | None) -> bytes:
        return keys[kid or ""].key.as_pem(private=False)

    return provide


async def test_the_sdk_verifier_accepts_a_card_without_the_default_tenant(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    merchant = signing_merchant(start_merchant, sqlite_url, tmp_path, tenants=TWO_TENANTS)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        card = (await fetch_card(http, merchant.base_url, "1.0")).card
        jwks = await fetch_jwks(http, merchant.base_url)

    # a2a-sdk's own verifier, given the merchant's published keys, accepts our signature.
    create_signature_verifier(sdk_key_provider(jwks), ["ES256"])(ParseDict(card, AgentCard()))


async def test_the_sdk_verifier_accepts_the_served_default_card(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    # The default tenant's payTo entry has no `tenant` member: a signed `"tenant": ""` would be dropped by the
    # SDK's canonical form (it drops every empty string, tests/agentcard/test_interop.py) and fail there.
    merchant = signing_merchant(start_merchant, sqlite_url, tmp_path)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        card = (await fetch_card(http, merchant.base_url, "1.0")).card
        jwks = await fetch_jwks(http, merchant.base_url)
        assert (await verify(http, merchant.base_url, card)).verified

    default_entry = {"network": merchant.settings.network, "address": DEFAULT_PAY_TO}
    assert x402_pay_to(card, EXTENSION_URI) == [default_entry]
    create_signature_verifier(sdk_key_provider(jwks), ["ES256"])(ParseDict(card, AgentCard()))
    # The SDK reads every member as we do (the payTo entry included) but the scope-less
    # `securityRequirements`, which its canonical form drops (a signature of its own covers that reading).
    assert card["securityRequirements"] and all(
        not scopes
        for requirement in card["securityRequirements"]
        for scopes in requirement.get("schemes", {}).values()
    )
    without_requirements = {name: value for name, value in card.items() if name != "securityRequirements"}
    assert _canonicalize_agent_card(ParseDict(card, AgentCard())).encode() == canonicalize_card(
        without_requirements
    )


async def test_signing_keys_can_come_from_the_environment_instead_of_a_key_directory(
    start_merchant: MerchantStarter, sqlite_url: str
) -> None:
    key = generate_signing_key("ES256")
    merchant = start_merchant(sqlite_url, card_signing_keys=json.dumps(key.private_jwk()))

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        served = await fetch_card(http, merchant.base_url, "1.0")
        result = await verify(http, merchant.base_url, served.card)
        jwks = await fetch_jwks(http, merchant.base_url)

    assert (result.status, result.kid) == (CardStatus.VERIFIED, key.kid)
    assert [k["kid"] for k in jwks["keys"]] == [key.kid]
    assert all("d" not in k for k in jwks["keys"])


async def test_the_signing_key_can_come_from_a_single_file(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    key = generate_signing_key("EdDSA")
    key_file = tmp_path / "card-key.jwk"
    key_file.write_text(json.dumps(key.private_jwk()))
    key_file.chmod(0o600)
    merchant = start_merchant(sqlite_url, card_signing_key_file=str(key_file))

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        served = await fetch_card(http, merchant.base_url, "1.0")
        result = await verify(http, merchant.base_url, served.card)
        jwks = await fetch_jwks(http, merchant.base_url)

    assert (result.status, result.kid) == (CardStatus.VERIFIED, key.kid)
    assert [(k["kid"], k["alg"]) for k in jwks["keys"]] == [(key.kid, "EdDSA")]
    assert all("d" not in k for k in jwks["keys"])


@pytest.mark.parametrize("key_file", ["missing.pem", "empty.pem"])
async def test_serve_refuses_to_start_with_an_unusable_key_file(
    chain: DevChain, tmp_path: Path, key_file: str
) -> None:
    # Never an unsigned card because the configured key could not be read.
    (tmp_path / "empty.pem").touch()
    env = {**serve_env(chain, tmp_path), "X402_CARD_SIGNING_KEY_FILE": str(tmp_path / key_file)}

    status, _out, err = await merchant_cli("serve", keys_dir=None, cwd=tmp_path, **env)

    assert status == 2
    assert err.startswith("x402-merchant: not starting: ") and "card signing: key_load_failed: " in err
    assert key_file in err and "Traceback" not in err
