"""A tenant's `ap2` table in the tenants file: read with its key and issuer files from the file's directory,
the default tenant's included; each mistake is one line naming the key, file or tenant, never a key's
content, and no registry is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc.jwk import ECKey

from a2a_x402.merchant.tenants import TenantConfigError, TenantRegistry
from tests.merchant.ap2.support import write_key

ACME_PAY_TO = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"
GLOBEX_PAY_TO = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"


def tenants_file(directory: Path, acme: str, globex: str = "") -> Path:
    """A file with tenants acme and globex, each `ap2` table given as TOML lines ("" for none)."""
    text = (
        f'[tenants.acme]\npay_to = "{ACME_PAY_TO}"\nprice = 100000\n'
        + (f"[tenants.acme.ap2]\n{acme}\n" if acme else "")
        + f'[tenants.globex]\npay_to = "{GLOBEX_PAY_TO}"\nprice = 100000\n'
        + (f"[tenants.globex.ap2]\n{globex}\n" if globex else "")
    )
    path = directory / "tenants.toml"
    path.write_text(text)
    return path


def ap2_table(merchant_id: str = "acme.example", keys: str = '["acme.pem"]', more: str = "") -> str:
    return f'merchant = {{ id = "{merchant_id}", name = "Acme" }}\ncheckout_keys = {keys}\n{more}'


def problem_of(path: Path) -> str:
    """The one problem the file has."""
    with pytest.raises(TenantConfigError) as refused:
        TenantRegistry.from_toml(path)
    [problem] = refused.value.problems
    assert "\n" not in problem and str(refused.value) == f"{path}: {problem}"
    return problem


def jwk_of(key: ec.EllipticCurvePrivateKey) -> ECKey:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ECKey.import_key(pem)


def pem_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if "-----" not in line and len(line) >= 16]


def test_a_declared_tenant_reads_its_files_from_the_files_directory(tmp_path: Path) -> None:
    key = write_key(tmp_path / "acme.pem")
    write_key(tmp_path / "old.pem")
    public = jwk_of(write_key(tmp_path / "surface.pem")).as_dict(private=False)
    (tmp_path / "surface.jwks.json").write_text(json.dumps({"keys": [public | {"kid": "surface-1"}]}))
    default = f'[default]\npay_to = "{ACME_PAY_TO}"\nprice = 1\n[default.ap2]\n'
    (tmp_path / "t.toml").write_text(
        default
        + 'merchant = { id = "shop.example", name = "Shop", website = "https://shop.example" }\n'
        + 'checkout_keys = ["acme.pem", "old.pem"]\nissuers = ["surface.jwks.json"]\nrequired = true\n'
    )

    [tenant] = TenantRegistry.from_toml(tmp_path / "t.toml")

    assert tenant.id == "" and tenant.ap2 is not None
    assert (tenant.ap2.merchant.id, tenant.ap2.merchant.website, tenant.ap2.required) == (
        "shop.example",
        "https://shop.example",
        True,
    )
    assert tenant.ap2.currency == "USD"
    assert tenant.ap2.checkout_keys.signing_kid == jwk_of(key).thumbprint()
    assert len(tenant.ap2.checkout_keys.kids) == 2
    assert list(tenant.ap2.issuers.by_kid) == ["surface-1"]


def test_a_tenant_without_ap2_has_none(tmp_path: Path) -> None:
    write_key(tmp_path / "acme.pem")
    registry = TenantRegistry.from_toml(tenants_file(tmp_path, ap2_table()))
    assert registry.require("globex").ap2 is None and registry.require("acme").ap2 is not None


@pytest.mark.parametrize("curve", [ec.SECP384R1(), ec.SECP256K1()], ids=["p384", "secp256k1"])
def test_a_key_that_is_not_p256_is_refused_without_its_content(
    tmp_path: Path, curve: ec.EllipticCurve
) -> None:
    write_key(tmp_path / "acme.pem", ec.generate_private_key(curve))
    problem = problem_of(tenants_file(tmp_path, ap2_table()))
    assert problem.startswith(f"tenants.acme.ap2.checkout_keys: checkout key file {tmp_path / 'acme.pem'}: ")
    assert f"the key is EC {curve.name}; checkout keys are EC P-256 (ES256)" in problem
    assert not any(line in problem for line in pem_lines(tmp_path / "acme.pem"))


def test_an_rsa_key_is_refused(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "acme.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    problem = problem_of(tenants_file(tmp_path, ap2_table()))
    assert "acme.pem: the key is RSA; checkout keys are EC P-256" in problem


def test_a_key_shared_by_two_tenants_is_refused(tmp_path: Path) -> None:
    write_key(tmp_path / "acme.pem")
    (tmp_path / "copy.pem").write_bytes((tmp_path / "acme.pem").read_bytes())
    globex = ap2_table("globex.example", '["copy.pem"]')
    problem = problem_of(tenants_file(tmp_path, ap2_table(), globex))
    assert problem == (
        f"tenant 'globex': checkout key file {tmp_path / 'copy.pem'} holds the key of tenant 'acme' "
        f"({tmp_path / 'acme.pem'}); a checkout key serves one tenant"
    )


def test_a_merchant_id_shared_by_two_tenants_is_refused(tmp_path: Path) -> None:
    write_key(tmp_path / "acme.pem")
    write_key(tmp_path / "globex.pem")
    globex = ap2_table("acme.example", '["globex.pem"]')
    assert problem_of(tenants_file(tmp_path, ap2_table(), globex)) == (
        "tenant 'globex': ap2.merchant.id 'acme.example' is also the id of tenant 'acme'; "
        "each tenant is an AP2 merchant of its own"
    )


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('merchant = { id = "a", name = "A" }', "tenants.acme.ap2.checkout_keys: is required"),
        ('checkout_keys = ["acme.pem"]', "tenants.acme.ap2.merchant: is required"),
        (ap2_table(keys="[]"), "tenants.acme.ap2.checkout_keys: needs at least one file"),
        (ap2_table(keys='["missing.pem"]'), "missing.pem: cannot be read (No such file or directory)"),
        (ap2_table(more="colour = 1"), "tenants.acme.ap2.colour: unknown key (allowed: merchant, "),
        (ap2_table(more='currency = "XBT"'), "tenants.acme.ap2.currency: no minor unit known for currency"),
        (ap2_table(more='required = "yes"'), "tenants.acme.ap2.required: must be true or false"),
        (
            ap2_table(more='issuers = ["http://surface.example/jwks.json"]'),
            "tenants.acme.ap2.issuers[0]: an issuer URL must be an absolute https:// URL",
        ),
        (
            ap2_table(more='issuers = ["https://s.example/k", "https://s.example/k"]'),
            "tenants.acme.ap2.issuers[1]: https://s.example/k: is given twice",
        ),
        (
            ap2_table(keys='["https://acme.example/key.pem"]'),
            "tenants.acme.ap2.checkout_keys[0]: https://acme.example/key.pem: must be a file path",
        ),
        (
            'merchant = { id = "a", name = "A", website = "ftp://a" }\ncheckout_keys = ["acme.pem"]',
            "tenants.acme.ap2.merchant.website: must be an absolute http(s) URL",
        ),
        (
            'merchant = { id = "", name = "A" }\ncheckout_keys = ["acme.pem"]',
            "tenants.acme.ap2.merchant.id: ",
        ),
    ],
)
def test_each_mistake_is_one_line(tmp_path: Path, table: str, expected: str) -> None:
    write_key(tmp_path / "acme.pem")
    assert expected in problem_of(tenants_file(tmp_path, table))


def test_an_issuer_file_with_a_private_key_is_refused_without_it(tmp_path: Path) -> None:
    write_key(tmp_path / "acme.pem")
    private = jwk_of(write_key(tmp_path / "surface.pem")).as_dict(private=True) | {"kid": "s-1"}
    (tmp_path / "surface.jwks.json").write_text(json.dumps({"keys": [private]}))
    problem = problem_of(tenants_file(tmp_path, ap2_table(more='issuers = ["surface.jwks.json"]')))
    assert problem.startswith(f"tenants.acme.ap2.issuers: issuer file {tmp_path / 'surface.jwks.json'}: ")
    assert "private key" in problem and str(private["d"]) not in problem


def test_https_issuers_are_kept_by_url_and_fetched_later(tmp_path: Path) -> None:
    write_key(tmp_path / "acme.pem")
    public = jwk_of(write_key(tmp_path / "surface.pem")).as_dict(private=False) | {"kid": "file-1"}
    (tmp_path / "surface.jwks.json").write_text(json.dumps({"keys": [public]}))
    urls = '"https://surface.example/jwks.json", "http://127.0.0.1:9/jwks.json"'
    table = ap2_table(more=f'issuers = ["surface.jwks.json", {urls}]')
    [acme] = [tenant for tenant in TenantRegistry.from_toml(tenants_file(tmp_path, table)) if tenant.ap2]
    assert acme.ap2 is not None
    assert acme.ap2.issuer_urls == ("https://surface.example/jwks.json", "http://127.0.0.1:9/jwks.json")
    assert list(acme.ap2.issuers.by_kid) == ["file-1"]


def test_an_issuer_url_with_user_info_is_refused_without_quoting_it(tmp_path: Path) -> None:
    write_key(tmp_path / "acme.pem")
    table = ap2_table(more='issuers = ["https://ops:hunter2secret@surface.example/jwks.json"]')
    problem = problem_of(tenants_file(tmp_path, table))
    assert (
        problem.startswith("tenants.acme.ap2.issuers[0]: an issuer URL must be") and "hunter2" not in problem
    )


def test_an_issuer_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    write_key(tmp_path / "acme.pem")
    (tmp_path / "surface.jwks.json").write_text("secret-looking text, not JSON")
    problem = problem_of(tenants_file(tmp_path, ap2_table(more='issuers = ["surface.jwks.json"]')))
    assert "surface.jwks.json: " in problem and "secret-looking" not in problem
