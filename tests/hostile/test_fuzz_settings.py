"""Tenant and webhook settings from a hostile or careless operator: generated tenants files and values.

`TenantRegistry.from_toml` must load a file or raise `TenantConfigError` listing the problems, never leak a
secret into that message, and never accept a file the rest of the merchant then refuses at startup: every
webhook secret it accepts must pass `merchant.webhooks.validate_secret`, which `WebhookEndpoints.sync` runs
in the app's lifespan. The webhook side gets arbitrary secrets, delivery URLs (`resolve_target`, IP
literals only so that nothing is looked up in DNS) and endpoint configurations (`WebhookEndpoints.sync`,
which must change nothing when it refuses them).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_x402.merchant.tenants import Tenant, TenantConfigError, TenantRegistry
from a2a_x402.merchant.webhooks import (
    EndpointConfig,
    InvalidEventError,
    InvalidWebhookSecretError,
    UnsafeTargetError,
    WebhookEndpoints,
    endpoint_configs,
    is_public_address,
    resolve_target,
    validate_secret,
)
from a2a_x402.storage import create_engine

from .strategies import json_values, printable_text, toml_key, toml_value, toml_values

_FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

_CHECKSUMMED = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
# Every secret generated here contains this marker, so a message that echoes a secret is recognisable.
_MARK = "Zq8sEcReT"
_GOOD_SECRET = "whsec_" + base64.b64encode(_MARK.encode() * 3).decode()


def _secret_like(draw: st.DrawFn) -> str:
    shape = draw(
        st.sampled_from(["whsec", "whsec-short", "plain", "spaced", "non-ascii", "whsec-junk", "random"])
    )
    body = draw(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=0, max_size=40))
    return {
        "whsec": _GOOD_SECRET,
        "whsec-short": "whsec_" + base64.b64encode(_MARK.encode()).decode(),
        "plain": _MARK + "x" * 16 + body,
        "spaced": _MARK + " with spaces " + body,
        "non-ascii": "whsec_" + _MARK + "é" * 8,
        "whsec-junk": "whsec_" + _MARK + body,
        "random": _MARK + draw(printable_text),
    }[shape]


_secrets = st.composite(lambda draw: _secret_like(draw))()
_tenant_ids = st.sampled_from(["acme", "globex", "a", "a-b", "tasks", "v1", "Acme", "-a", "a" * 64, "ü"]) | (
    printable_text
)
_addresses = st.sampled_from(
    [
        _CHECKSUMMED,
        _CHECKSUMMED.lower(),
        "0x" + _CHECKSUMMED[2:].upper(),
        _CHECKSUMMED[:-1] + "D",
        _CHECKSUMMED[:-2],
        "0x",
        "",
    ]
)
_amounts = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from(["0", "10000", str(2**256 - 1), str(2**256), "-1", " 1", "1e6", "0x10", "١٢"]),
    st.floats(),
    st.booleans(),
)
_urls = st.sampled_from(
    [
        "https://acme.example/x402/events",
        "http://127.0.0.1:9/hook",
        "mailto:ops@acme.example",
        "https://",
        "http://[",
        "http://[::1",
        "https://\uff03x/",
        "http://a\u2100b/",
        "http://a:99999999/",
        "//acme.example/h",
        "",
    ]
) | printable_text.map(lambda text: "https://" + text)
_TENANT_MEMBERS: dict[str, st.SearchStrategy[Any]] = {
    "pay_to": _addresses,
    "price": _amounts,
    "skill_prices": st.dictionaries(st.sampled_from(["text-stats", "", "x"]), _amounts, max_size=2)
    | toml_values,
    "webhook_url": _urls,
    "webhook_secret": _secrets,
    "api_token": _secrets,
}


@st.composite
def _tenant_table(draw: st.DrawFn) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for name, values in _TENANT_MEMBERS.items():
        # pay_to and price are required: present most of the time so the other members get checked too.
        if draw(st.sampled_from([True, True, True, False] if name in ("pay_to", "price") else [True, False])):
            # Usually a value of the member's kind, sometimes any TOML value.
            typed = draw(st.sampled_from([True, True, True, False]))
            table[name] = draw(values if typed else toml_values)
    if draw(st.sampled_from([False, False, False, True])):
        table[draw(printable_text)] = draw(toml_values)
    return table


@st.composite
def _tenants_file(draw: st.DrawFn) -> str:
    lines: list[str] = []
    if draw(st.sampled_from([False, False, False, True])):
        lines.append(f"{toml_key(draw(printable_text))} = {toml_value(draw(toml_values))}")
    tables: list[tuple[str, dict[str, Any]]] = []
    if draw(st.booleans()):
        tables.append(("default", draw(_tenant_table())))
    for tenant_id in draw(st.lists(_tenant_ids, max_size=3, unique=True)):
        tables.append((f"tenants.{toml_key(tenant_id)}", draw(_tenant_table())))
    for header, table in tables:
        lines.append(f"[{header}]")
        lines += [f"{toml_key(key)} = {toml_value(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def _load(path: Path, text: str) -> TenantRegistry | TenantConfigError:
    path.write_text(text, encoding="utf-8")
    try:
        return TenantRegistry.from_toml(path)
    except TenantConfigError as exc:
        return exc


@_FUZZ
@given(_tenants_file() | printable_text)
def test_a_tenants_file_loads_or_lists_its_problems_without_echoing_secrets(
    tmp_path: Path, text: str
) -> None:
    loaded = _load(tmp_path / "tenants.toml", text)
    if isinstance(loaded, TenantConfigError):
        assert loaded.problems
        assert _MARK not in str(loaded)
        return
    for tenant in loaded:
        assert tenant.pay_to == _CHECKSUMMED
        assert isinstance(tenant.price, int) and 0 <= tenant.price < 2**256
        assert (tenant.webhook_url is None) == (tenant.webhook_secret is None)


@_FUZZ
@given(_tenants_file())
def test_an_accepted_tenants_file_is_accepted_by_the_webhooks_too(tmp_path: Path, text: str) -> None:
    """The app's lifespan syncs the configured endpoints; a file `from_toml` accepts must not fail there."""
    loaded = _load(tmp_path / "tenants.toml", text)
    if isinstance(loaded, TenantConfigError):
        return
    for config in endpoint_configs(loaded):
        assert validate_secret(config.secret) == config.secret


def test_a_webhook_secret_the_webhooks_refuse_is_a_tenant_config_error(tmp_path: Path) -> None:
    """Pinned example of the property above: 16+ characters, but not the Standard Webhooks form."""
    text = (
        f'[tenants.acme]\npay_to = "{_CHECKSUMMED}"\nprice = 1\n'
        f'webhook_url = "https://acme.example/h"\nwebhook_secret = "{_MARK}-not-whsec-form"\n'
    )
    loaded = _load(tmp_path / "tenants.toml", text)
    assert isinstance(loaded, TenantConfigError)
    assert loaded.problems[0].startswith("tenants.acme.webhook_secret: ")


@pytest.mark.parametrize("url", ["http://[", "http://[::1/h", "https://\uff03x/", "http://a\u2100b/"])
def test_an_unparsable_webhook_url_is_a_tenant_config_error(tmp_path: Path, url: str) -> None:
    """Pinned: `urlsplit` raises ValueError on these; the file must still be reported, not crash the load."""
    text = (
        f'[tenants.acme]\npay_to = "{_CHECKSUMMED}"\nprice = 1\n'
        f'webhook_url = {toml_value(url)}\nwebhook_secret = "{_GOOD_SECRET}"\n'
    )
    loaded = _load(tmp_path / "tenants.toml", text)
    assert isinstance(loaded, TenantConfigError)
    assert loaded.problems == (f"tenants.acme.webhook_url: must be an absolute http(s) URL, got str {url!r}",)


_python_values = json_values | st.sampled_from([b"bytes", object(), (1, 2), {1, 2}])


@_FUZZ
@given(
    st.fixed_dictionaries(
        {
            "id": _tenant_ids | _python_values,
            "pay_to": _addresses | _python_values,
            "price": _amounts | _python_values,
        },
        optional={
            "skill_prices": st.dictionaries(
                printable_text | st.integers(), _amounts | _python_values, max_size=2
            ),
            "webhook_url": _urls | _python_values,
            "webhook_secret": _secrets | _python_values,
            "api_token": _secrets | _python_values,
        },
    )
)
def test_a_tenant_built_from_any_values_is_valid_or_a_tenant_config_error(fields: dict[str, Any]) -> None:
    try:
        tenant = Tenant(**fields)
    except TenantConfigError as exc:
        assert _MARK not in str(exc)
        return
    assert tenant.pay_to == _CHECKSUMMED
    if tenant.webhook_secret is not None:
        validate_secret(tenant.webhook_secret)


# -- webhooks -----------------------------------------------------------------------------------------


@_FUZZ
@given(_secrets | printable_text | st.text(max_size=80))
def test_a_webhook_secret_is_valid_or_refused_without_being_echoed(secret: str) -> None:
    try:
        assert validate_secret(secret) == secret
    except InvalidWebhookSecretError as exc:
        assert secret not in str(exc) or len(secret) < 6


def test_a_non_ascii_webhook_secret_is_refused_with_the_typed_error() -> None:
    """Pinned: `base64.b64decode` raises a plain ValueError (not binascii.Error) on non-ASCII text."""
    with pytest.raises(InvalidWebhookSecretError):
        validate_secret("whsec_" + "é" * 32)


_ip_hosts = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda address: f"[{address}]"),
    st.sampled_from(["[::ffff:127.0.0.1]", "[fe80::1%25eth0]", "0", "[::]", "2130706433", "localhost"]),
)


@st.composite
def _target_urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["https", "http", "ftp", "HTTP", ""]))
    port = draw(st.sampled_from(["", ":443", ":0", ":65535", ":65536", ":-1", ":x"]))
    path = draw(st.sampled_from(["", "/", "/hook?x=1", "/#frag"]) | printable_text.map(lambda t: "/" + t))
    userinfo = draw(st.sampled_from(["", "user:pw@", "@"]))
    return f"{scheme}://{userinfo}{draw(_ip_hosts)}{port}{path}"


@_FUZZ
@given(_target_urls() | printable_text, st.booleans())
async def test_a_delivery_url_is_pinned_to_a_checked_address_or_refused(
    url: str, allow_private: bool
) -> None:
    try:
        target = await resolve_target(url, allow_private=allow_private)
    except UnsafeTargetError:
        return
    assert target.url.scheme in ("http", "https")
    assert allow_private or is_public_address(target.address)


_event_types = st.lists(
    st.sampled_from(["settlement.completed", "settlement.failed", "webhook.test", "Settlement.Completed", ""])
    | printable_text,
    max_size=3,
).map(tuple)
_configs = st.lists(
    st.builds(
        EndpointConfig,
        tenant=st.sampled_from(["acme", "globex", ""]) | printable_text,
        url=_urls,
        secret=_secrets | st.just(_GOOD_SECRET),
        event_types=_event_types,
    ),
    max_size=3,
)


async def _endpoint_rows(database_url: str) -> list[tuple[Any, ...]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(sa.text("SELECT * FROM webhook_endpoints ORDER BY id"))
            return [tuple(row) for row in rows]
    finally:
        await engine.dispose()


@settings(_FUZZ, max_examples=60)
@given(_configs)
async def test_endpoint_sync_applies_a_configuration_or_refuses_it_changing_nothing(
    sqlite_url: str, configs: list[EndpointConfig]
) -> None:
    before = await _endpoint_rows(sqlite_url)
    engine = create_engine(sqlite_url)
    try:
        await WebhookEndpoints(engine).sync(configs)
    except (InvalidWebhookSecretError, InvalidEventError):
        assert await _endpoint_rows(sqlite_url) == before
    finally:
        await engine.dispose()
