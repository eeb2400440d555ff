"""What makes a tenant's settings valid: one check per kind of value, each returning its problems.

Every check returns a list of one-line problems (empty when the value is fine) naming the key, so the
registry can report every mistake in a tenants file at once. A secret's value never appears in a problem.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Protocol
from urllib.parse import urlsplit

from eth_utils.address import is_checksum_address, is_hex_address, to_checksum_address

__all__ = [
    "DEFAULT_TENANT",
    "DEFAULT_TENANT_SEGMENT",
    "Ap2Entry",
    "Subscription",
    "address_problems",
    "ap2_sharing_problems",
    "amount_problems",
    "describe",
    "is_http_url",
    "metered_problems",
    "secret_problems",
    "skill_price_problems",
    "subscription_problems",
    "tenant_id_problems",
    "webhook_problems",
    "webhook_secret_problems",
]

DEFAULT_TENANT = ""
"""The tenant of requests that name none."""

DEFAULT_TENANT_SEGMENT = "default"
"""How the default tenant is named in paths that always carry a tenant (the billing API's
`/tenants/{tenant}`), as in the tenants file's `[default]` table; reserved as a tenant id so that it names
nothing else."""

_TENANT_ID = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
# Tenant ids are path segments on HTTP+JSON (`/a2a/rest/{tenant}/...`). These would collide with the
# default tenant's routes there: `/a2a/rest/tasks/...`, the SDK's 0.3 compatibility routes (`/v1`), and
# the default tenant's name in the billing API.
_RESERVED_TENANT_IDS = frozenset({"tasks", "v1", DEFAULT_TENANT_SEGMENT})
_MIN_SECRET_CHARS = 16
_WEBHOOK_SECRET_PREFIX = "whsec_"  # noqa: S105 - the Standard Webhooks prefix, not a secret
_WEBHOOK_SECRET_BYTES_MIN, _WEBHOOK_SECRET_BYTES_MAX = 24, 64
_UINT256_LIMIT = 2**256
_EVENT_TYPE = re.compile(r"^[a-z]+(?:\.[a-z_]+)+$")


class Subscription(Protocol):
    """A webhook endpoint as configured: what `subscription_problems` reads of one."""

    @property
    def url(self) -> str: ...

    @property
    def secret(self) -> str: ...

    @property
    def event_types(self) -> Sequence[str]: ...


def describe(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


def tenant_id_problems(tenant_id: object) -> list[str]:
    if tenant_id == DEFAULT_TENANT:
        return []
    if not isinstance(tenant_id, str) or not _TENANT_ID.fullmatch(tenant_id):
        return [
            f"id: {tenant_id!r} is not a valid tenant id (1-63 lowercase letters, digits and inner hyphens, "
            "or the empty string for the default tenant)"
        ]
    if tenant_id in _RESERVED_TENANT_IDS:
        return [f"id: {tenant_id!r} is reserved (it collides with a route)"]
    return []


def address_problems(name: str, value: object) -> list[str]:
    if not isinstance(value, str) or not is_hex_address(value):
        return [f"{name}: must be a 0x-prefixed 20-byte hex address, got {describe(value)}"]
    body = value[2:]
    if body != body.lower() and body != body.upper() and not is_checksum_address(value):
        return [f"{name}: {value} has a wrong EIP-55 checksum (expected {to_checksum_address(value)})"]
    return []


def amount_problems(name: str, value: object) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int):
        return [
            f"{name}: must be a whole number of atomic units (an integer or a decimal string such as "
            f'"2500000"), got {describe(value)}'
        ]
    if value < 0:
        return [f"{name}: must not be negative, got {value}"]
    if value >= _UINT256_LIMIT:
        return [f"{name}: must be below 2**256, got {value}"]
    return []


def skill_price_problems(skill_prices: Mapping[str, object]) -> list[str]:
    problems: list[str] = []
    for skill_id, amount in skill_prices.items():
        if not isinstance(skill_id, str) or not skill_id:
            problems.append(f"skill_prices: skill ids must be non-empty strings, got {describe(skill_id)}")
            continue
        problems += amount_problems(f"skill_prices.{skill_id}", amount)
    return problems


def metered_problems(metered_skills: Mapping[str, object], skill_prices: Mapping[str, object]) -> list[str]:
    """Problems of `metered_skills` (skill id = the most one task may cost): each maximum a positive amount,
    and no skill both metered and fixed-price (which would leave its price to the reader's guess)."""
    problems: list[str] = []
    for skill_id, maximum in metered_skills.items():
        at = f"metered_skills.{skill_id}"
        if not isinstance(skill_id, str) or not skill_id:
            problems.append(f"metered_skills: skill ids must be non-empty strings, got {describe(skill_id)}")
        elif skill_id in skill_prices:
            problems.append(f"{at}: {skill_id!r} has a fixed price in skill_prices too: keep one")
        elif amount_problems(at, maximum):
            problems += amount_problems(at, maximum)
        elif maximum == 0:
            problems.append(f"{at}: the maximum must be above 0 (a skill that costs nothing is priced 0)")
    return problems


def webhook_problems(url: object, secret: object) -> list[str]:
    if url is None:
        return [] if secret is None else ["webhook_secret: is set but webhook_url is not"]
    problems: list[str] = []
    if not is_http_url(url):
        problems.append(f"webhook_url: must be an absolute http(s) URL, got {describe(url)}")
    if secret is None:
        problems.append("webhook_secret: is required when webhook_url is set")
    else:
        problems += webhook_secret_problems(secret)
    return problems


def subscription_problems(webhooks: Sequence[Subscription], webhook_url: object) -> list[str]:
    problems: list[str] = []
    # A malformed webhook_url is reported by webhook_problems; here it only must not be listed twice.
    seen: set[str] = {webhook_url} if isinstance(webhook_url, str) else set()
    for index, webhook in enumerate(webhooks):
        at = f"webhooks[{index}]"
        if not is_http_url(webhook.url):
            problems.append(f"{at}.url: must be an absolute http(s) URL, got {describe(webhook.url)}")
        elif webhook.url in seen:
            problems.append(f"{at}.url: {webhook.url} is configured more than once for this tenant")
        else:
            seen.add(webhook.url)  # only URLs: a TOML array or table is not hashable
        problems += [f"{at}.{problem}" for problem in webhook_secret_problems(webhook.secret, "secret")]
        for event_type in webhook.event_types:
            if not isinstance(event_type, str) or not _EVENT_TYPE.fullmatch(event_type):
                problems.append(
                    f"{at}.event_types: {describe(event_type)} is not an event type name "
                    "(such as settlement.completed)"
                )
    return problems


def is_http_url(url: object) -> bool:
    if not isinstance(url, str):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced IPv6 bracket, a host that changes under NFKC normalisation
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def webhook_secret_problems(secret: object, name: str = "webhook_secret") -> list[str]:
    # The Standard Webhooks form that `merchant.webhooks.validate_secret` requires when the app syncs the
    # endpoints at startup; checked here as well (webhooks imports this module, not the reverse) so that a
    # file this registry accepts cannot stop the merchant from starting.
    problem = [
        f"{name}: must be {_WEBHOOK_SECRET_PREFIX} followed by the base64 of "
        f"{_WEBHOOK_SECRET_BYTES_MIN} to {_WEBHOOK_SECRET_BYTES_MAX} bytes"
    ]
    if not isinstance(secret, str) or not secret.startswith(_WEBHOOK_SECRET_PREFIX):
        return problem
    try:
        key = base64.b64decode(secret[len(_WEBHOOK_SECRET_PREFIX) :], validate=True)
    except ValueError:  # bad base64 (binascii.Error) or non-ASCII text
        return problem
    if not _WEBHOOK_SECRET_BYTES_MIN <= len(key) <= _WEBHOOK_SECRET_BYTES_MAX:
        return problem
    return []


def secret_problems(name: str, value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, str) or len(value) < _MIN_SECRET_CHARS or any(ch.isspace() for ch in value):
        # Never echo the value: it is a secret.
        return [f"{name}: must be a string of at least {_MIN_SECRET_CHARS} characters without whitespace"]
    return []


def limit_problems(name: str, value: object, *, minimum: int = 1, maximum: int = 10**9) -> list[str]:
    """Problems of an optional whole-number limit `name` (None: the settings' default applies)."""
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int):
        return [f"{name}: must be a whole number, got {describe(value)}"]
    if not minimum <= value <= maximum:
        return [f"{name}: must be between {minimum} and {maximum}, got {value}"]
    return []


class Ap2Entry(Protocol):
    """What `ap2_sharing_problems` reads of a tenant's `ap2` table: its merchant id and checkout keys."""

    @property
    def merchant_id(self) -> str: ...

    @property
    def checkout_kids(self) -> Sequence[tuple[str, str]]: ...


def ap2_sharing_problems(entries: Sequence[tuple[str, Ap2Entry]]) -> list[str]:
    """Problems of the tenants in the embedded flow (`(tenant name, its ap2)`) taken together: a checkout key
    (by its `kid`, a thumbprint of the public key) serves one tenant, and a `merchant.id`, the audience of
    the mandates presented to a tenant, names one tenant (§20.1, §20.2)."""
    problems: list[str] = []
    key_owner: dict[str, tuple[str, str]] = {}
    id_owner: dict[str, str] = {}
    for name, entry in entries:
        if entry.merchant_id in id_owner:
            problems.append(
                f"tenant {name!r}: ap2.merchant.id {entry.merchant_id[:200]!r} is also the id of tenant "
                f"{id_owner[entry.merchant_id]!r}; each tenant is an AP2 merchant of its own"
            )
        id_owner.setdefault(entry.merchant_id, name)
        for kid, path in entry.checkout_kids:
            if kid in key_owner and key_owner[kid][0] != name:
                owner, owner_path = key_owner[kid]
                problems.append(
                    f"tenant {name!r}: checkout key file {path} holds the key of tenant {owner!r} "
                    f"({owner_path}); a checkout key serves one tenant"
                )
            key_owner.setdefault(kid, (name, path))
    return problems
