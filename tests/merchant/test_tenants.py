"""Tenants and the tenant registry: TOML loading, strict validation with complete error lists."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from a2a_x402.merchant.tenants import (
    DEFAULT_TENANT,
    TENANTS_FILE_ENV,
    Tenant,
    TenantConfigError,
    TenantJwtIssuer,
    TenantRegistry,
    UnknownTenantError,
)

CHECKSUMMED = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
OTHER = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # noqa: S105 (a test value)
TOKEN = "tok_3b1f5d7c9e2a4b6c8d0e"  # noqa: S105 (a test value)
NOT_AN_AMOUNT = 'must be a whole number of atomic units (an integer or a decimal string such as "2500000")'


VALID = f"""
[default]
pay_to = "{CHECKSUMMED}"
price = 10000

[tenants.acme]
pay_to = "{OTHER.lower()}"
price = "115792089237316195423570985008687907853269984665640564039457584007913129639935"
webhook_url = "https://acme.example/x402/events"
webhook_secret = "{SECRET}"
api_token = "{TOKEN}"

[tenants.acme.skill_prices]
translate = 5000
summarize = "250"

[tenants.globex]
pay_to = "{OTHER}"
price = 0
"""


def write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "tenants.toml"
    path.write_text(content)
    return path


def problems_of(tmp_path: Path, content: str) -> tuple[str, ...]:
    with pytest.raises(TenantConfigError) as failure:
        TenantRegistry.from_toml(write(tmp_path, content))
    assert failure.value.code == "tenant_config_invalid"
    assert str(tmp_path) in str(failure.value)
    return failure.value.problems


def test_loads_a_valid_file(tmp_path: Path) -> None:
    registry = TenantRegistry.from_toml(write(tmp_path, VALID))

    assert [tenant.id for tenant in registry] == [DEFAULT_TENANT, "acme", "globex"]
    assert len(registry) == 3 and "acme" in registry and "ghost" not in registry
    acme = registry.require("acme")
    assert acme.pay_to == OTHER
    assert acme.price == 2**256 - 1
    assert dict(acme.skill_prices) == {"translate": 5000, "summarize": 250}
    assert (acme.webhook_url, acme.webhook_secret, acme.api_token) == (
        "https://acme.example/x402/events",
        SECRET,
        TOKEN,
    )
    default = registry.require(DEFAULT_TENANT)
    assert (default.pay_to, default.price, dict(default.skill_prices)) == (CHECKSUMMED, 10000, {})
    assert registry.get("globex") is not None and registry.get("ghost") is None


def test_prices_fall_back_to_the_default_price() -> None:
    tenant = Tenant(id="acme", pay_to=CHECKSUMMED, price=100, skill_prices={"translate": 7})

    assert (tenant.price_for(), tenant.price_for("translate"), tenant.price_for("other")) == (100, 7, 100)


def test_api_token_check() -> None:
    tenant = Tenant(id="acme", pay_to=CHECKSUMMED, price=1, api_token=TOKEN)

    assert tenant.accepts_api_token(TOKEN)
    assert not tenant.accepts_api_token(TOKEN + "x")
    assert not Tenant(id="acme", pay_to=CHECKSUMMED, price=1).accepts_api_token(TOKEN)


def test_tenant_is_frozen_and_hides_secrets() -> None:
    tenant = Tenant(
        id="acme", pay_to=CHECKSUMMED, price=1, webhook_url="https://a.example/h", webhook_secret=SECRET
    )

    with pytest.raises(dataclasses.FrozenInstanceError):
        tenant.price = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        tenant.skill_prices["x"] = 1  # type: ignore[index]
    assert SECRET not in repr(tenant)


def test_unknown_tenant() -> None:
    registry = TenantRegistry.default(pay_to=CHECKSUMMED, price=5)

    with pytest.raises(UnknownTenantError, match="unknown tenant 'ghost'") as failure:
        registry.require("ghost")
    assert failure.value.code == "unknown_tenant"


def test_default_registry_holds_only_the_default_tenant() -> None:
    registry = TenantRegistry.default(pay_to=OTHER.lower(), price=5)

    assert [(tenant.id, tenant.pay_to, tenant.price) for tenant in registry] == [(DEFAULT_TENANT, OTHER, 5)]


def test_from_environment_reads_the_named_file_or_falls_back(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)

    from_file = TenantRegistry.from_environment(
        default_pay_to=OTHER, default_price=1, environ={TENANTS_FILE_ENV: str(path)}
    )
    built_in = TenantRegistry.from_environment(default_pay_to=OTHER, default_price=1, environ={})

    assert [tenant.id for tenant in from_file] == [DEFAULT_TENANT, "acme", "globex"]
    assert [(tenant.id, tenant.pay_to) for tenant in built_in] == [(DEFAULT_TENANT, OTHER)]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        f"""
colour = "blue"

[tenants.acme]
pay_to = "0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
price = -1
surprise = 1

[tenants.globex]
pay_to = "not an address"
price = 1.5

[tenants.initech]
price = "12.5"

[tenants.Bad_Id]
pay_to = "{CHECKSUMMED}"
price = true

[tenants.tasks]
pay_to = "{CHECKSUMMED}"
price = 1

[tenants.default]
pay_to = "{CHECKSUMMED}"
price = 1
""",
    )

    assert problems == (
        "colour: unknown key (allowed: default, tenants)",
        "tenants.acme.surprise: unknown key "
        "(allowed: pay_to, price, skill_prices, metered_skills, webhook_url, webhook_secret, webhooks, "
        "api_token, max_unpaid_tasks, max_unpaid_per_minute, unpaid_retention_s, anonymous_callers, "
        "jwt_issuers, ap2)",
        "tenants.globex.pay_to: must be a 0x-prefixed 20-byte hex address, got str 'not an address'",
        f"tenants.globex.price: {NOT_AN_AMOUNT}, got float 1.5",
        "tenants.initech.pay_to: is required",
        "tenants.Bad_Id.id: 'Bad_Id' is not a valid tenant id (1-63 lowercase letters, digits and inner "
        "hyphens, or the empty string for the default tenant)",
        f"tenants.Bad_Id.price: {NOT_AN_AMOUNT}, got bool True",
        "tenants.tasks.id: 'tasks' is reserved (it collides with a route)",
        "tenants.default.id: 'default' is reserved (it collides with a route)",
    )


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            f'pay_to = "{CHECKSUMMED[:-1]}D"\nprice = 1',
            "pay_to: 0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD has a ",
        ),
        (f'pay_to = "{CHECKSUMMED}"\nprice = -1', "price: must not be negative, got -1"),
        (f'pay_to = "{CHECKSUMMED}"\nprice = "-1"', "price: must be a whole number"),
        (f'pay_to = "{CHECKSUMMED}"\nprice = "1e6"', "price: must be a whole number"),
        (f'pay_to = "{CHECKSUMMED}"\nprice = " 1"', "price: must be a whole number"),
        (f'pay_to = "{CHECKSUMMED}"\nprice = "{2**256}"', "price: must be below 2**256"),
        (
            f'pay_to = "{CHECKSUMMED}"\nprice = 1\nskill_prices = {{ a = 0.5 }}',
            "skill_prices.a: must be a whole",
        ),
        (f'pay_to = "{CHECKSUMMED}"\nprice = 1\nskill_prices = 3', "skill_prices: must be a table"),
        (
            f'pay_to = "{CHECKSUMMED}"\nprice = 1\nwebhook_url = "https://a.example/h"',
            "webhook_secret: is required",
        ),
        (f'pay_to = "{CHECKSUMMED}"\nprice = 1\nwebhook_secret = "{SECRET}"', "webhook_secret: is set but"),
        (
            f'pay_to = "{CHECKSUMMED}"\nprice = 1\nwebhook_url = "mailto:x@a.example"\n'
            f'webhook_secret = "{SECRET}"',
            "webhook_url: must be an absolute http(s) URL",
        ),
        (
            f'pay_to = "{CHECKSUMMED}"\nprice = 1\napi_token = "short"',
            "api_token: must be a string of at least 16",
        ),
    ],
)
def test_invalid_tenant_entries_are_rejected(tmp_path: Path, entry: str, problem: str) -> None:
    problems = problems_of(tmp_path, f"[tenants.acme]\n{entry}\n")

    assert len(problems) == 1
    assert problems[0].startswith(f"tenants.acme.{problem}")


def test_secrets_are_never_echoed(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path, f'[tenants.acme]\npay_to = "{CHECKSUMMED}"\nprice = 1\napi_token = "my secret"\n'
    )

    assert "my secret" not in "".join(problems)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "no tenant is declared"),
        ("tenants = 3", "tenants: must be a table of tenant tables"),
        ("[default]\npay_to = 1\nprice = 1\n", "default.pay_to: must be a 0x-prefixed"),
        (
            f'[tenants.""]\npay_to = "{CHECKSUMMED}"\nprice = 1\n',
            'tenants."": the default tenant is declared as',
        ),
        ("[tenants]\nacme = 3\n", "tenants.acme: must be a table"),
        ("price = = 1", "not valid TOML"),
    ],
)
def test_invalid_files_are_rejected(tmp_path: Path, content: str, problem: str) -> None:
    assert problems_of(tmp_path, content)[0].startswith(problem)


@pytest.mark.parametrize(
    ("url", "described"),
    [
        ('["https://a.example/h"]', "list ['https://a.example/h']"),
        ('{ href = "https://a.example/h" }', "dict {'href': 'https://a.example/h'}"),
    ],
)
def test_a_webhook_url_that_is_not_a_string_is_listed_with_the_other_problems(
    tmp_path: Path, url: str, described: str
) -> None:
    webhooks = [url, '"https://b.example/h"', '"https://b.example/h"']
    content = f'[tenants.acme]\npay_to = "{CHECKSUMMED}"\nprice = 1\n' + "".join(
        f'[[tenants.acme.webhooks]]\nurl = {webhook}\nsecret = "{SECRET}"\n' for webhook in webhooks
    )

    assert problems_of(tmp_path, content) == (
        f"tenants.acme.webhooks[0].url: must be an absolute http(s) URL, got {described}",
        "tenants.acme.webhooks[2].url: https://b.example/h is configured more than once for this tenant",
    )


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(TenantConfigError, match="cannot read the file"):
        TenantRegistry.from_toml(tmp_path / "absent.toml")


def test_registry_rejects_duplicates_and_emptiness() -> None:
    tenant = Tenant(id="acme", pay_to=CHECKSUMMED, price=1)

    with pytest.raises(TenantConfigError, match="'acme' is declared more than once"):
        TenantRegistry([tenant, tenant])
    with pytest.raises(TenantConfigError, match="no tenant is configured"):
        TenantRegistry([])


def test_direct_construction_is_validated() -> None:
    with pytest.raises(TenantConfigError) as failure:
        Tenant(id="acme", pay_to="0x12", price=-5, api_token="x")  # noqa: S106 (a test value)

    assert failure.value.problems == (
        "pay_to: must be a 0x-prefixed 20-byte hex address, got str '0x12'",
        "price: must not be negative, got -5",
        "api_token: must be a string of at least 16 characters without whitespace",
    )
    assert str(failure.value).startswith("tenant 'acme': 3 problems in the tenant configuration:")
    with pytest.raises(TenantConfigError, match=r"^tenant 'default': pay_to: must be"):
        Tenant(id="", pay_to="0x12", price=1)  # the default tenant by its name, never ''


def test_a_tenant_may_set_its_own_bounds_on_unpaid_work(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(
        f'[tenants.acme]\npay_to = "{CHECKSUMMED}"\nprice = 1\n'
        "max_unpaid_tasks = 5\nmax_unpaid_per_minute = 10\nunpaid_retention_s = 600\n"
        f'[tenants.globex]\npay_to = "{CHECKSUMMED}"\nprice = 1\n'
    )
    registry = TenantRegistry.from_toml(path)
    acme, globex = registry.require("acme"), registry.require("globex")
    assert (acme.max_unpaid_tasks, acme.max_unpaid_per_minute, acme.unpaid_retention_s) == (5, 10, 600)
    # Unset: the settings' defaults apply.
    assert (globex.max_unpaid_tasks, globex.max_unpaid_per_minute, globex.unpaid_retention_s) == (None,) * 3


def test_bounds_on_unpaid_work_are_validated(tmp_path: Path) -> None:
    content = (
        f'[tenants.acme]\npay_to = "{CHECKSUMMED}"\nprice = 1\n'
        'max_unpaid_tasks = 0\nmax_unpaid_per_minute = "ten"\nunpaid_retention_s = 60\n'
    )
    assert problems_of(tmp_path, content) == (
        "tenants.acme.max_unpaid_tasks: must be between 1 and 1000000000, got 0",
        "tenants.acme.max_unpaid_per_minute: must be a whole number, got str 'ten'",
        "tenants.acme.unpaid_retention_s: must be between 300 and 1000000000, got 60",
    )


def test_anonymous_callers_is_a_tenants_boolean_setting(tmp_path: Path) -> None:
    registry = TenantRegistry.from_toml(
        write(
            tmp_path,
            f'[tenants.acme]\npay_to = "{OTHER}"\nprice = 1\nanonymous_callers = false\n'
            f'[tenants.globex]\npay_to = "{OTHER}"\nprice = 1\n',
        )
    )
    assert registry.require("acme").anonymous_callers is False
    assert registry.require("globex").anonymous_callers is True

    problems = problems_of(
        tmp_path, f'[tenants.acme]\npay_to = "{OTHER}"\nprice = 1\nanonymous_callers = "no"\n'
    )
    assert len(problems) == 1
    assert problems[0].startswith("tenants.acme.anonymous_callers: must be true or false")


ISSUER = "https://login.acme.example/"
JWKS = "https://login.acme.example/jwks.json"


def test_a_tenant_may_trust_its_own_jwt_issuers(tmp_path: Path) -> None:
    registry = TenantRegistry.from_toml(
        write(
            tmp_path,
            f'[tenants.acme]\npay_to = "{OTHER}"\nprice = 1\n'
            f'[[tenants.acme.jwt_issuers]]\nissuer = "{ISSUER}"\naudience = "shop"\njwks_url = "{JWKS}"\n'
            '[[tenants.acme.jwt_issuers]]\nissuer = "dev"\naudience = "shop"\n'
            'jwks_url = "http://127.0.0.1:8080/jwks.json"\n'
            f'[tenants.globex]\npay_to = "{OTHER}"\nprice = 1\n',
        )
    )

    assert registry.require("acme").jwt_issuers == (
        TenantJwtIssuer(issuer=ISSUER, audience="shop", jwks_url=JWKS),
        TenantJwtIssuer(issuer="dev", audience="shop", jwks_url="http://127.0.0.1:8080/jwks.json"),
    )
    assert registry.require("globex").jwt_issuers == ()


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ('jwt_issuers = "x"', "tenants.acme.jwt_issuers: must be an array of tables"),
        (
            f'[[tenants.acme.jwt_issuers]]\nissuer = "{ISSUER}"\naudience = "shop"\n',
            "tenants.acme.jwt_issuers[0].jwks_url: is required",
        ),
        (
            f'[[tenants.acme.jwt_issuers]]\nissuer = "{ISSUER}"\naudience = "shop"\n'
            f'jwks_url = "{JWKS}"\nkid = 1',
            "tenants.acme.jwt_issuers[0].kid: unknown key (allowed: issuer, audience, jwks_url)",
        ),
        (
            f'[[tenants.acme.jwt_issuers]]\nissuer = ""\naudience = "shop"\njwks_url = "{JWKS}"\n',
            "tenants.acme.jwt_issuers[0].issuer: must be a non-empty string",
        ),
        (
            f'[[tenants.acme.jwt_issuers]]\nissuer = "{ISSUER}"\naudience = 7\njwks_url = "{JWKS}"\n',
            "tenants.acme.jwt_issuers[0].audience: must be a non-empty string",
        ),
        (
            f'[[tenants.acme.jwt_issuers]]\nissuer = "{ISSUER}"\naudience = "shop"\n'
            'jwks_url = "http://login.acme.example/jwks.json"\n',
            "tenants.acme.jwt_issuers[0].jwks_url: must be an https URL (http only on a loopback host)",
        ),
        (
            f'[[tenants.acme.jwt_issuers]]\nissuer = "{ISSUER}"\naudience = "shop"\njwks_url = "file:///etc"\n',
            "tenants.acme.jwt_issuers[0].jwks_url: must be an https URL",
        ),
        (
            f'[[tenants.acme.jwt_issuers]]\nissuer = "{ISSUER}"\naudience = "a"\njwks_url = "{JWKS}"\n'
            f'[[tenants.acme.jwt_issuers]]\nissuer = "{ISSUER}"\naudience = "b"\njwks_url = "{JWKS}"\n',
            f"tenants.acme.jwt_issuers[1].issuer: {ISSUER} is declared more than once for this tenant",
        ),
    ],
)
def test_a_tenants_jwt_issuers_are_validated(tmp_path: Path, entries: str, problem: str) -> None:
    problems = problems_of(tmp_path, f'[tenants.acme]\npay_to = "{OTHER}"\nprice = 1\n{entries}\n')

    assert len(problems) == 1
    assert problems[0].startswith(problem)


def test_a_skill_may_be_metered_up_to_a_maximum(tmp_path: Path) -> None:
    registry = TenantRegistry.from_toml(
        write(
            tmp_path,
            f"""
[tenants.acme]
pay_to = "{CHECKSUMMED}"
price = 100

[tenants.acme.skill_prices]
translate = 7

[tenants.acme.metered_skills]
summarize = "500000"
huge = "{2**256 - 1}"
""",
        )
    )

    acme = registry.require("acme")
    assert dict(acme.metered_skills) == {"summarize": 500000, "huge": 2**256 - 1}
    assert (acme.price_for("summarize"), acme.is_metered("summarize")) == (500000, True)
    assert (acme.price_for("translate"), acme.is_metered("translate")) == (7, False)
    assert (acme.price_for("other"), acme.is_metered("other")) == (100, False)
    with pytest.raises(TypeError):
        acme.metered_skills["x"] = 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            "[tenants.acme.skill_prices]\nsummarize = 5\n[tenants.acme.metered_skills]\nsummarize = 9",
            "metered_skills.summarize: 'summarize' has a fixed price in skill_prices too: keep one",
        ),
        (
            "[tenants.acme.metered_skills]\nsummarize = 0",
            "metered_skills.summarize: the maximum must be above 0 (a skill that costs nothing is priced 0)",
        ),
        ("[tenants.acme.metered_skills]\nsummarize = -5", "metered_skills.summarize: must not be negative"),
        ("[tenants.acme.metered_skills]\nsummarize = 1.5", f"metered_skills.summarize: {NOT_AN_AMOUNT}"),
        ('[tenants.acme.metered_skills]\nsummarize = "1e6"', "metered_skills.summarize: must be a whole"),
        (
            f'[tenants.acme.metered_skills]\nsummarize = "{2**256}"',
            "metered_skills.summarize: must be below 2**256",
        ),
        ("[tenants.acme]\nmetered_skills = 3", "metered_skills: must be a table of skill id = amount"),
    ],
)
def test_metered_skills_are_validated(tmp_path: Path, entry: str, problem: str) -> None:
    head = f'[tenants.acme]\npay_to = "{CHECKSUMMED}"\nprice = 1\n'
    if entry.startswith("[tenants.acme]\n"):
        head, entry = head + entry.removeprefix("[tenants.acme]\n"), ""
    problems = problems_of(tmp_path, f"{head}{entry}\n")

    assert len(problems) == 1
    assert problems[0].startswith(f"tenants.acme.{problem}"), problems[0]


def test_a_tenant_built_directly_cannot_price_a_skill_both_ways() -> None:
    with pytest.raises(TenantConfigError, match="has a fixed price in skill_prices too"):
        Tenant(id="acme", pay_to=CHECKSUMMED, price=1, skill_prices={"a": 1}, metered_skills={"a": 2})
