"""Tenants: the sellers one merchant deployment serves, keyed by the A2A `tenant` routing key.

A tenant has its own payee address, prices, webhook and API token. A request names its tenant through the
protocol's `tenant` field (a path segment on HTTP+JSON, `params.tenant` on JSON-RPC); the empty string is the
default tenant, reached by requests that carry no tenant.

The registry is built once at startup, either from a TOML file (`X402_TENANTS_FILE`) or as the built-in
registry holding only the default tenant. Validation is strict and complete: every mistake in the file is
reported at once with its key path, and nothing half-valid is ever returned. Invariants of a `Tenant`:
`pay_to` is EIP-55 checksummed, every price is an `int` number of atomic units in [0, 2**256) (a metered
skill's maximum above 0, the skill not priced in `skill_prices` as well), and a webhook
URL always comes with its signing secret (`whsec_` + base64 of 24 to 64 bytes, the Standard Webhooks form).

File format::

    [default]                       # optional: the default tenant "" (requests without a tenant)
    pay_to = "0x..."
    price = 10000                   # atomic units: a TOML integer or a decimal string such as "10000"

    [tenants.acme]
    pay_to = "0x..."
    price = "2500000"
    webhook_url = "https://acme.example/x402/events"
    webhook_secret = "whsec_..."
    api_token = "..."
    anonymous_callers = false       # optional: only callers with credentials (default true)

    max_unpaid_tasks = 100          # optional, per caller: tasks awaiting payment (X402_MAX_UNPAID_TASKS)
    max_unpaid_per_minute = 60      # optional, per caller: priced tasks a minute (X402_MAX_UNPAID_PER_MINUTE)
    unpaid_retention_s = 3600       # optional: unpaid tasks purged after (X402_UNPAID_RETENTION_S)

    [tenants.acme.skill_prices]     # optional per-skill prices, by AgentSkill id
    translate = 5000

    [tenants.acme.metered_skills]   # optional: skills charged by what the work reports it used
    summarize = "500000"            # the most one task may cost (x402 `upto`); not in skill_prices too

    [[tenants.acme.webhooks]]       # more endpoints, each subscribed to chosen event types
    url = "https://acme.example/x402/reversals"
    secret = "whsec_..."
    event_types = ["settlement.reversed"]   # optional: every event type when absent

    [[tenants.acme.jwt_issuers]]    # optional: bearer JWTs of this issuer authenticate callers here only
    issuer = "https://login.acme.example/"
    audience = "https://shop.example/a2a"
    jwks_url = "https://login.acme.example/.well-known/jwks.json"   # https (http only on loopback)

    [tenants.acme.ap2]              # optional: the embedded flow (AP2 mandates), format in `_tenant_ap2`

`webhook_url` with `webhook_secret` is the short form of one `[[webhooks]]` entry subscribed to every event
type; a tenant may use both, but each endpoint URL only once. Event type names are checked for their form
here and against the known types when the webhook endpoints are synced at startup.
"""

from __future__ import annotations

import hmac
import os
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from eth_utils.address import to_checksum_address

from ._tenant_ap2 import TenantAp2, parse_ap2
from ._tenant_jwt import TenantJwtIssuer, jwt_issuer_problems, parse_jwt_issuers
from ._tenant_rules import (
    DEFAULT_TENANT,
    DEFAULT_TENANT_SEGMENT,
    address_problems,
    amount_problems,
    ap2_sharing_problems,
    describe,
    limit_problems,
    metered_problems,
    secret_problems,
    skill_price_problems,
    subscription_problems,
    tenant_id_problems,
    webhook_problems,
)

__all__ = [
    "DEFAULT_TENANT",
    "DEFAULT_TENANT_SEGMENT",
    "TENANTS_FILE_ENV",
    "Tenant",
    "TenantAp2",
    "TenantConfigError",
    "TenantJwtIssuer",
    "TenantRegistry",
    "UnknownTenantError",
    "WebhookSubscription",
    "tenant_id_of",
    "tenant_name",
]

TENANTS_FILE_ENV = "X402_TENANTS_FILE"
"""Environment variable holding the path of the tenants TOML file."""

_DECIMAL = re.compile(r"^[0-9]+$")
_UNPAID_KEYS = ("max_unpaid_tasks", "max_unpaid_per_minute", "unpaid_retention_s")
_TENANT_KEYS = (
    "pay_to",
    "price",
    "skill_prices",
    "metered_skills",
    "webhook_url",
    "webhook_secret",
    "webhooks",
    "api_token",
    *_UNPAID_KEYS,
    "anonymous_callers",
    "jwt_issuers",
    "ap2",
)
# The shortest retention: an unpaid task is kept at least as long as its terms can be paid.
_MIN_RETENTION_S = 300
_WEBHOOK_KEYS = ("url", "secret", "event_types")
_REQUIRED_TENANT_KEYS = ("pay_to", "price")
_TOP_LEVEL_KEYS = ("default", "tenants")


class TenantConfigError(ValueError):
    """The tenant configuration is invalid; `problems` lists every mistake found, each with its key path."""

    code = "tenant_config_invalid"

    def __init__(self, problems: Sequence[str], source: str | None = None) -> None:
        self.problems = tuple(problems)
        self.source = source
        prefix = f"{source}: " if source else ""
        if len(self.problems) == 1:
            message = prefix + self.problems[0]
        else:
            listed = "\n".join(f"  - {problem}" for problem in self.problems)
            message = f"{prefix}{len(self.problems)} problems in the tenant configuration:\n{listed}"
        super().__init__(message)


class UnknownTenantError(LookupError):
    """No tenant with this id is configured."""

    code = "unknown_tenant"

    def __init__(self, tenant_id: str, known: Iterable[str] | None = None) -> None:
        self.tenant_id = tenant_id
        listed = "" if known is None else f" (the tenants are: {', '.join(tenant_name(t) for t in known)})"
        super().__init__(f"unknown tenant {tenant_name(tenant_id)!r}{listed}")


def tenant_name(tenant_id: str) -> str:
    """How a tenant is named to people, on the command line as in the billing API's paths: its id, or
    `default` for the default tenant."""
    return DEFAULT_TENANT_SEGMENT if tenant_id == DEFAULT_TENANT else tenant_id


def tenant_id_of(name: str) -> str:
    """The tenant id a name given by a person means: `default` (or the empty id) is the default tenant."""
    return DEFAULT_TENANT if name in (DEFAULT_TENANT_SEGMENT, DEFAULT_TENANT) else name


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookSubscription:
    """One webhook endpoint of a tenant: its URL, its signing secret, the event types it receives (none:
    every type). Validated by the `Tenant` that holds it."""

    url: str
    secret: str = field(repr=False)
    event_types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """One seller: where its payments go, what it charges, and how it is told and authenticated.

    Construction validates every field and raises `TenantConfigError` listing all problems. An all-lowercase
    or all-uppercase `pay_to` is normalised to its EIP-55 form; a mixed-case one must already be correct,
    since a wrong checksum usually means a mistyped address.
    """

    id: str
    pay_to: str
    price: int
    skill_prices: Mapping[str, int] = field(default_factory=dict, hash=False)
    metered_skills: Mapping[str, int] = field(default_factory=dict, hash=False)
    webhook_url: str | None = None
    webhook_secret: str | None = field(default=None, repr=False)
    webhooks: tuple[WebhookSubscription, ...] = ()
    api_token: str | None = field(default=None, repr=False)
    max_unpaid_tasks: int | None = None
    max_unpaid_per_minute: int | None = None
    unpaid_retention_s: int | None = None
    anonymous_callers: bool = True
    jwt_issuers: tuple[TenantJwtIssuer, ...] = ()
    ap2: TenantAp2 | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        problems = [
            *tenant_id_problems(self.id),
            *address_problems("pay_to", self.pay_to),
            *amount_problems("price", self.price),
            *skill_price_problems(self.skill_prices),
            *metered_problems(self.metered_skills, self.skill_prices),
            *webhook_problems(self.webhook_url, self.webhook_secret),
            *subscription_problems(self.webhooks, self.webhook_url),
            *secret_problems("api_token", self.api_token),
            *limit_problems("max_unpaid_tasks", self.max_unpaid_tasks),
            *limit_problems("max_unpaid_per_minute", self.max_unpaid_per_minute),
            *limit_problems("unpaid_retention_s", self.unpaid_retention_s, minimum=_MIN_RETENTION_S),
            *jwt_issuer_problems(self.jwt_issuers),
        ]
        if problems:
            raise TenantConfigError(problems, source=f"tenant {tenant_name(self.id)!r}")
        object.__setattr__(self, "pay_to", to_checksum_address(self.pay_to))
        object.__setattr__(self, "skill_prices", MappingProxyType(dict(self.skill_prices)))
        object.__setattr__(self, "metered_skills", MappingProxyType(dict(self.metered_skills)))

    @property
    def webhook_endpoints(self) -> tuple[WebhookSubscription, ...]:
        """Every webhook endpoint of the tenant: `webhook_url` (all event types) first, then `webhooks`."""
        if self.webhook_url is None or self.webhook_secret is None:
            return self.webhooks
        return (WebhookSubscription(url=self.webhook_url, secret=self.webhook_secret), *self.webhooks)

    def price_for(self, skill_id: str | None = None) -> int:
        """The price in atomic units for `skill_id`, falling back to the tenant's default price; for a
        metered skill, the most one task may cost (what is charged is what the work used, up to it)."""
        if skill_id is None:
            return self.price
        return self.metered_skills.get(skill_id, self.skill_prices.get(skill_id, self.price))

    def is_metered(self, skill_id: str) -> bool:
        """Whether `skill_id` is charged by what its work used (`metered_skills`), up to `price_for`."""
        return skill_id in self.metered_skills

    def accepts_api_token(self, token: str) -> bool:
        """Whether `token` is this tenant's API token (constant-time; always False when none is set)."""
        if self.api_token is None:
            return False
        return hmac.compare_digest(token.encode(), self.api_token.encode())


class TenantRegistry:
    """The configured tenants, in declaration order with the default tenant (if any) first."""

    def __init__(self, tenants: Iterable[Tenant]) -> None:
        """Build a registry; raises `TenantConfigError` on duplicate ids or when there is no tenant at all."""
        ordered = sorted(tenants, key=lambda tenant: tenant.id != DEFAULT_TENANT)
        by_id: dict[str, Tenant] = {}
        problems: list[str] = []
        for tenant in ordered:
            if tenant.id in by_id:
                problems.append(f"tenant {tenant.id!r} is declared more than once")
            by_id[tenant.id] = tenant
        if not by_id:
            problems.append("no tenant is configured")
        problems += ap2_sharing_problems([(tenant_name(t.id), t.ap2) for t in by_id.values() if t.ap2])
        if problems:
            raise TenantConfigError(problems)
        self._by_id = by_id

    @classmethod
    def default(cls, *, pay_to: str, price: int, api_token: str | None = None) -> TenantRegistry:
        """The built-in registry: only the default tenant "", paid to `pay_to` at `price` atomic units, its
        billing API open to `api_token` (closed without one)."""
        return cls([Tenant(id=DEFAULT_TENANT, pay_to=pay_to, price=price, api_token=api_token)])

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> TenantRegistry:
        """Load and validate a tenants TOML file (format in the module docstring).

        Reads the file synchronously: call it at startup, not from request handling.

        Raises:
            TenantConfigError: the file cannot be read or parsed, or any entry is invalid (all are listed).
        """
        source = os.fspath(path)
        try:
            with open(source, "rb") as handle:
                document = tomllib.load(handle)
        except OSError as exc:
            raise TenantConfigError([f"cannot read the file: {exc.strerror or exc}"], source) from exc
        except tomllib.TOMLDecodeError as exc:
            raise TenantConfigError([f"not valid TOML: {exc}"], source) from exc
        tenants, problems = _parse_document(document, Path(source).parent)
        if problems:
            raise TenantConfigError(problems, source)
        try:
            return cls(tenants)
        except TenantConfigError as exc:
            raise TenantConfigError(exc.problems, source) from exc

    @classmethod
    def from_environment(
        cls, *, default_pay_to: str, default_price: int, environ: Mapping[str, str] | None = None
    ) -> TenantRegistry:
        """The registry from the file named by `X402_TENANTS_FILE`, or the built-in default registry if unset.

        Raises:
            TenantConfigError: the named file is unreadable or invalid, or the default tenant is invalid.
        """
        env = os.environ if environ is None else environ
        path = env.get(TENANTS_FILE_ENV, "").strip()
        if path:
            return cls.from_toml(path)
        return cls.default(pay_to=default_pay_to, price=default_price)

    @classmethod
    def configured_ids(cls, tenants_file: str | None) -> frozenset[str]:
        """The ids of the tenants `tenants_file` declares, or only the default tenant's without a file.

        Raises:
            TenantConfigError: the file is unreadable or invalid.
        """
        if not tenants_file:
            return frozenset({DEFAULT_TENANT})
        return frozenset(tenant.id for tenant in cls.from_toml(tenants_file))

    def get(self, tenant_id: str) -> Tenant | None:
        """The tenant with this id, or None."""
        return self._by_id.get(tenant_id)

    def require(self, tenant_id: str) -> Tenant:
        """The tenant with this id.

        Raises:
            UnknownTenantError: no such tenant is configured.
        """
        tenant = self._by_id.get(tenant_id)
        if tenant is None:
            raise UnknownTenantError(tenant_id)
        return tenant

    def __contains__(self, tenant_id: object) -> bool:
        return tenant_id in self._by_id

    def __iter__(self) -> Iterator[Tenant]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"TenantRegistry({list(self._by_id)!r})"


def _parse_document(document: Mapping[str, Any], base: Path) -> tuple[list[Tenant], list[str]]:
    problems = [_unknown_key(key, "", _TOP_LEVEL_KEYS) for key in document if key not in _TOP_LEVEL_KEYS]
    tenants: list[Tenant] = []
    entries: list[tuple[str, str, Any]] = []
    if "default" in document:
        entries.append((DEFAULT_TENANT, "default", document["default"]))
    declared = document.get("tenants", {})
    if not isinstance(declared, dict):
        problems.append(f"tenants: must be a table of tenant tables, got {describe(declared)}")
        declared = {}
    for tenant_id, table in declared.items():
        if tenant_id == DEFAULT_TENANT:
            problems.append('tenants."": the default tenant is declared as the [default] table')
            continue
        entries.append((tenant_id, f"tenants.{tenant_id}", table))
    if not entries:
        problems.append("no tenant is declared: add a [default] table or [tenants.<id>] tables")
    for tenant_id, where, table in entries:
        tenant, tenant_problems = _parse_tenant(tenant_id, where, table, base)
        problems.extend(tenant_problems)
        if tenant is not None:
            tenants.append(tenant)
    return tenants, problems


def _parse_tenant(tenant_id: str, where: str, table: Any, base: Path) -> tuple[Tenant | None, list[str]]:
    if not isinstance(table, dict):
        return None, [f"{where}: must be a table, got {describe(table)}"]
    problems = [_unknown_key(key, f"{where}.", _TENANT_KEYS) for key in table if key not in _TENANT_KEYS]
    problems += [f"{where}.{key}: is required" for key in _REQUIRED_TENANT_KEYS if key not in table]
    skill_prices, metered = (table.get(key, {}) for key in ("skill_prices", "metered_skills"))
    for key, value in (("skill_prices", skill_prices), ("metered_skills", metered)):
        if not isinstance(value, dict):
            problems.append(f"{where}.{key}: must be a table of skill id = amount, got {describe(value)}")
    webhooks, webhook_problems = _parse_webhooks(f"{where}.webhooks", table.get("webhooks", []))
    problems += webhook_problems
    jwt_issuers, issuer_problems = parse_jwt_issuers(f"{where}.jwt_issuers", table.get("jwt_issuers", []))
    problems += issuer_problems
    ap2, ap2_problems = parse_ap2(f"{where}.ap2", table.get("ap2"), base, tenant=tenant_name(tenant_id))
    problems += ap2_problems
    anonymous = table.get("anonymous_callers", True)
    if not isinstance(anonymous, bool):
        problems.append(f"{where}.anonymous_callers: must be true or false, got {describe(anonymous)}")
    if problems:
        return None, problems
    try:
        tenant = Tenant(
            id=tenant_id,
            pay_to=table["pay_to"],
            price=_coerce_amount(table["price"]),
            skill_prices={skill: _coerce_amount(amount) for skill, amount in skill_prices.items()},
            metered_skills={skill: _coerce_amount(amount) for skill, amount in metered.items()},
            webhook_url=table.get("webhook_url"),
            webhook_secret=table.get("webhook_secret"),
            webhooks=webhooks,
            api_token=table.get("api_token"),
            **{key: table[key] for key in _UNPAID_KEYS if key in table},
            anonymous_callers=anonymous,
            jwt_issuers=jwt_issuers,
            ap2=ap2,
        )
    except TenantConfigError as exc:
        return None, [f"{where}.{problem}" for problem in exc.problems]
    return tenant, []


def _parse_webhooks(where: str, entries: Any) -> tuple[tuple[WebhookSubscription, ...], list[str]]:
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        return (), [f"{where}: must be an array of tables ([[...webhooks]]), got {describe(entries)}"]
    subscriptions: list[WebhookSubscription] = []
    problems: list[str] = []
    for index, entry in enumerate(entries):
        at = f"{where}[{index}]"
        problems += [_unknown_key(key, f"{at}.", _WEBHOOK_KEYS) for key in entry if key not in _WEBHOOK_KEYS]
        problems += [f"{at}.{key}: is required" for key in ("url", "secret") if key not in entry]
        event_types = entry.get("event_types", [])
        if not isinstance(event_types, list):
            problems.append(
                f"{at}.event_types: must be an array of event type names, got {describe(event_types)}"
            )
            continue
        if "url" in entry and "secret" in entry:
            subscriptions.append(
                WebhookSubscription(url=entry["url"], secret=entry["secret"], event_types=tuple(event_types))
            )
    return tuple(subscriptions), problems


def _coerce_amount(value: Any) -> Any:
    # Decimal strings let a file state amounts beyond TOML's 64-bit integers; anything else is left for the
    # Tenant validation to reject with the field's name.
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return int(value)
    return value


def _unknown_key(key: str, prefix: str, allowed: Sequence[str]) -> str:
    return f"{prefix}{key}: unknown key (allowed: {', '.join(allowed)})"
