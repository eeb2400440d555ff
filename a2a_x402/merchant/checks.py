"""The merchant's preflight checks: its configuration against the real node, database and files.

`check_merchant` runs them all for `x402-merchant check` and `serve` (which refuses to start on a fatal
one); each is a small async function returning a named `observability.CheckResult`. `network`, `relayer`
and `database` are the facilitator's shared probes, the ones `/readyz` runs too (the chain id and the
relayer's balance read in one batch). Beyond those:

- `asset`: the token address has code (without it every payment fails at settlement);
- `asset domain`: its EIP-712 domain (from `eip712Domain()`, else `name()` and `version()`) is
  `X402_ASSET_NAME` / `X402_ASSET_VERSION` (the domain payers sign; with another, every signature is
  refused), and its `decimals()` is `X402_ASSET_DECIMALS` (the shared probe, which the facilitator's check
  runs on each token of `X402_ASSETS` too);
- `facilitator`: with `X402_FACILITATOR_URL`, the remote facilitator answers and supports the network;
- `revert budget`: without it and with `X402_RELAYER_REVERT_BUDGET_WEI` set, the relayer key did not spend
  its hourly budget on reverted settlements (the facilitator's check; read only from a database at head);
- `erc6492 factories`: without it, every wallet factory of `X402_ERC6492_FACTORIES` has code;
- `tenants`: the tenants file (or `X402_PAY_TO`) is valid;
- `skill prices`: every `skill_prices` and `metered_skills` key names a skill the merchant offers;
- `metering`: with metered skills, the facilitator (remote, or in process: the chain's Permit2 and upto
  proxy) settles `upto` payments on the network (`_metering`);
- `webhooks`: every webhook URL passes the SSRF rules the delivery worker applies;
- `card signing`: the configured Agent Card keys load and sign a card their public keys verify;
- `ap2`: with a tenant in the embedded flow, the AP2 SDK imports and its checkout keys are P-256, and
  each such tenant can be offered to (`_ap2_check`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial

from a2a.types import AgentSkill
from eth_account import Account

from a2a_x402.agentcard import AgentCardError, CardVerifier, SignaturePolicy, VerificationKey, sign_card
from a2a_x402.facilitator import (
    CHECK_TIMEOUT_S,
    ChainError,
    ReadStatus,
    RpcClient,
    check_asset_code,
    check_asset_domain,
    check_database,
    erc6492_factories,
    erc6492_factories_check,
    foreign_settlements_check,
    load_private_key,
    network_check,
    read_chain_status,
    read_once,
    relayer_check,
    stored_revert_budget_check,
)
from a2a_x402.observability import Check, CheckResult, run_checks

from ._ap2_check import check_ap2, declares_ap2
from ._facilitator_probe import check_remote_facilitator, shown_url
from ._metering import CHAIN_LACKS_UPTO, chain_lists_upto, metered_names, metering_check, remote_lists_upto
from .app import MERCHANT_SKILLS
from .payments import TransferMethod, probe_transfer_method
from .settings import MerchantSettings
from .tenants import TenantConfigError, TenantRegistry, tenant_name
from .webhooks import UnsafeTargetError, resolve_target
from .wiring import card_signing_keys, load_tenants

__all__ = [
    "check_asset_code",
    "check_asset_domain",
    "check_card_signing",
    "check_merchant",
    "check_remote_facilitator",
    "check_skill_prices",
    "check_tenants",
    "check_webhooks",
]

_UPGRADE = "x402-merchant db upgrade"


async def _asset_domain(rpc: RpcClient, settings: MerchantSettings) -> CheckResult:
    """`asset domain` of a token paid by its EIP-3009; one paid through Permit2 signs nothing of its own
    (its payers sign Permit2's domain), so a token without `version()` is fine there. Where there is no token
    at all (or the node cannot say), the domain check itself says why nothing could be read."""
    method = settings.asset_transfer_method
    if method != TransferMethod.EIP3009.value and await _has_code(rpc, settings.asset):
        if method == "permit2" or await probe_transfer_method(rpc, settings.asset) is TransferMethod.PERMIT2:
            return CheckResult.passed("asset domain", "not needed: the token is paid through Permit2")
    return await check_asset_domain(
        rpc,
        settings.asset,
        settings.asset_name,
        settings.asset_version,
        expected_decimals=settings.asset_decimals,
    )


async def _has_code(rpc: RpcClient, address: str) -> bool:
    try:
        return await rpc.call("eth_getCode", address, "latest") not in ("0x", "0x0", "")
    except ChainError:
        return False


async def check_merchant(
    settings: MerchantSettings, *, skills: Sequence[AgentSkill] = MERCHANT_SKILLS
) -> list[CheckResult]:
    """Every check of the merchant `settings` configure, offering `skills`, in a fixed order."""
    rpc = RpcClient(settings.rpc_url)
    try:
        tenants: TenantRegistry | TenantConfigError
        try:
            tenants = await asyncio.to_thread(load_tenants, settings)
        except TenantConfigError as exc:
            tenants = exc
        relayer, read, relayer_addresses = await _relayer(rpc, settings)
        checks = [
            network_check(read, settings.network),
            Check("asset", partial(check_asset_code, rpc, settings.asset, settings.network)),
            Check("asset domain", partial(_asset_domain, rpc, settings)),
        ]
        if settings.facilitator_url:
            checks.append(
                Check(
                    "facilitator",
                    partial(
                        check_remote_facilitator,
                        settings.facilitator_url,
                        settings.network,
                        door=True,
                        api_key=settings.remote_facilitator_key(),
                    ),
                )
            )
            branches: tuple[str, ...] = ("merchant",)
        else:
            checks.append(relayer)
            factories = erc6492_factories(settings.erc6492_factories)
            if factories:
                checks.append(erc6492_factories_check(rpc, factories))
            branches = ("merchant", "facilitator")
        database = partial(check_database, settings.database_url, *branches, upgrade_command=_UPGRADE)
        checks.append(Check("database", database))
        if not settings.facilitator_url:
            # A remote facilitator's claim store, and so this rule, is its operator's.
            checks.append(foreign_settlements_check(settings.count_foreign_settlements))
        checks.append(Check("tenants", partial(check_tenants, tenants, settings)))
        if isinstance(tenants, TenantRegistry):
            checks += [
                Check("skill prices", partial(check_skill_prices, tenants, skills)),
                Check(
                    "webhooks",
                    partial(check_webhooks, tenants, allow_private=settings.webhooks_allow_private),
                ),
                *_metering(settings, tenants, rpc),
            ]
            if declares_ap2(tenants):
                checks.append(Check("ap2", partial(check_ap2, tenants, settings)))
        checks.append(Check("card signing", partial(check_card_signing, settings)))
        results = await run_checks(checks, timeout_s=CHECK_TIMEOUT_S)
        if not settings.facilitator_url:
            results += await _revert_budget(settings, relayer_addresses, results)
        return results
    finally:
        await rpc.aclose()


async def check_tenants(
    tenants: TenantRegistry | TenantConfigError, settings: MerchantSettings
) -> CheckResult:
    """`tenants`: the tenants file (or the default tenant of `X402_PAY_TO`) is valid."""
    source = settings.tenants_file or "X402_PAY_TO / X402_PRICE"
    if isinstance(tenants, TenantConfigError):
        return CheckResult.problem("tenants", "; ".join(tenants.problems) + f" ({source})")
    names = ", ".join(tenant_name(tenant.id) for tenant in tenants)
    return CheckResult.passed("tenants", f"{len(tenants)} from {source}: {names}")


async def check_skill_prices(tenants: TenantRegistry, skills: Sequence[AgentSkill]) -> CheckResult:
    """`skill prices`: each tenant's `skill_prices` and `metered_skills` keys name skills in `skills` (a typo
    would charge the tenant's default price for the skill it meant)."""
    offered = {skill.id for skill in skills}
    unknown = [
        f"{tenant_name(tenant.id)}.{key}.{skill}"
        for tenant in tenants
        for key, skill_ids in (
            ("skill_prices", tenant.skill_prices),
            ("metered_skills", tenant.metered_skills),
        )
        for skill in skill_ids
        if skill not in offered
    ]
    if unknown:
        return CheckResult.problem(
            "skill prices", f"{', '.join(unknown)}: no such skill (offered: {', '.join(sorted(offered))})"
        )
    priced = sum(len(tenant.skill_prices) + len(tenant.metered_skills) for tenant in tenants)
    return CheckResult.passed("skill prices", f"{priced} skill price(s), each for an offered skill")


async def check_webhooks(tenants: TenantRegistry, *, allow_private: bool) -> CheckResult:
    """`webhooks`: every endpoint URL passes the delivery worker's SSRF rules (resolved now).

    A URL that is not http(s) or reaches a non-public address is fatal; a host that does not resolve at the
    moment is a problem, not fatal (DNS may come back, and the worker retries).
    """
    urls = [(tenant_name(tenant.id), hook.url) for tenant in tenants for hook in tenant.webhook_endpoints]

    async def refusal(tenant: str, url: str) -> tuple[str, bool] | None:
        try:
            await resolve_target(url, allow_private=allow_private)
        except UnsafeTargetError as exc:
            unresolved = isinstance(exc.__cause__, OSError | TimeoutError)
            return f"{tenant}: {shown_url(url)}: {exc}", not unresolved
        return None

    refused = [found for found in await asyncio.gather(*(refusal(t, u) for t, u in urls)) if found]
    if refused:
        return CheckResult.problem(
            "webhooks", "; ".join(text for text, _ in refused), fatal=any(fatal for _, fatal in refused)
        )
    allowed = " (private addresses allowed: X402_WEBHOOKS_ALLOW_PRIVATE)" if allow_private else ""
    return CheckResult.passed("webhooks", f"{len(urls)} endpoint(s) pass the address rules{allowed}")


async def check_card_signing(settings: MerchantSettings) -> CheckResult:
    """`card signing`: the configured keys load, and each signs a card its public key verifies."""
    try:
        keys = await asyncio.to_thread(card_signing_keys, settings)
    except AgentCardError as exc:
        return CheckResult.problem("card signing", f"{exc.code}: {exc}")
    if not keys:
        return CheckResult.passed("card signing", "no signing keys configured: cards are served unsigned")
    probe = {"name": "x402 preflight", "description": "a card signed to check the key", "version": "0"}
    for key in keys:
        verifier = CardVerifier(
            trusted_keys=[VerificationKey.from_jwk(key.public_jwk())], policy=SignaturePolicy.REQUIRE
        )
        try:
            await verifier.verify(sign_card(probe, [key]))
        except AgentCardError as exc:
            return CheckResult.problem("card signing", f"key {key.kid} does not sign verifiably: {exc}")
    kids = ", ".join(f"{key.alg} {key.kid}" for key in keys)
    return CheckResult.passed("card signing", f"{len(keys)} key(s) sign and verify: {kids}")


def _metering(settings: MerchantSettings, tenants: TenantRegistry, rpc: RpcClient) -> list[Check]:
    """`metering`, where some tenant meters a skill: of the remote facilitator's `/supported`, or of the
    chain the in-process facilitator settles on."""
    if settings.facilitator_url:
        key = settings.remote_facilitator_key()
        listed, where, lacking = (
            remote_lists_upto(settings.facilitator_url, settings.network, key),
            shown_url(settings.facilitator_url),
            "",
        )
    else:
        listed, where, lacking = chain_lists_upto(rpc), "the in-process facilitator", CHAIN_LACKS_UPTO
    check = metering_check(
        metered_names(tenants), listed, where=where, network=settings.network, lacking=lacking
    )
    return [] if check is None else [check]


async def _revert_budget(
    settings: MerchantSettings, relayers: Sequence[str], results: Sequence[CheckResult]
) -> list[CheckResult]:
    """The in-process facilitator's `revert budget`, read only from a database at head (one that is not
    says so in its own check), and only with a budget and a usable relayer key."""
    facilitator = settings.facilitator_settings()
    budget = facilitator.relayer_revert_budget_wei
    database_ok = all(result.ok for result in results if result.name == "database")
    if budget is None or not relayers or not database_ok:
        return []
    check = stored_revert_budget_check(settings.database_url, facilitator.chain_id, relayers, budget)
    return await run_checks([check], timeout_s=CHECK_TIMEOUT_S)


async def _relayer(rpc: RpcClient, settings: MerchantSettings) -> tuple[Check, ReadStatus, tuple[str, ...]]:
    """The in-process facilitator's `relayer` check, and the chain read `network` shares with it (one batch
    for the chain id and the relayer's balance)."""
    refused = None
    addresses: tuple[str, ...] = ()
    if settings.facilitator_url:
        pass  # the remote facilitator's relayers are its own: `network` reads the chain alone
    elif settings.relayer_key is None:
        refused = "X402_RELAYER_KEY is not set: the in-process facilitator cannot settle without it"
    else:
        try:
            key = await asyncio.to_thread(load_private_key, settings.relayer_key.get_secret_value())
        except ValueError as exc:
            refused = str(exc)
        else:
            addresses = (Account.from_key(key).address,)
    read = read_once(partial(read_chain_status, rpc, addresses))
    if refused is not None:
        return Check.answered(CheckResult.problem("relayer", refused)), read, addresses
    return relayer_check(read, settings.relayer_min_balance_wei), read, addresses
