"""The tenants file edits of `ap2-keys` (`_ap2_rotation`): only the tenant's `checkout_keys` is rewritten,
whatever way the file writes its table, array or comments; the default tenant's included; a key file beside
the signing key, named in the file as that one is; a refused edit leaves the file and no new key behind."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from a2a_x402.merchant._ap2_rotation import Ap2KeyError, Payable, retire_key, rotate_key
from a2a_x402.merchant.tenants import DEFAULT_TENANT, TenantRegistry
from tests.merchant.ap2.support import write_key

PAY_TO = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"
NOW = datetime(2026, 12, 5, 17, 0, tzinfo=UTC)
NOTHING_PAYABLE = Payable(0, None)


def checkout_keys(path: Path, tenant: str) -> list[str]:
    """The tenant's checkout key files as the merchant reads them, the signing one first."""
    ap2 = TenantRegistry.from_toml(path).get(tenant).ap2  # type: ignore[union-attr]
    assert ap2 is not None
    return [Path(file).name for _, file in ap2.checkout_kids]


@pytest.mark.parametrize(
    ("header", "array"),
    [
        ("[tenants.acme.ap2]", '["keys/acme.pem"]'),
        ('[ tenants."acme".ap2 ]  # quoted', '[\n  "keys/acme.pem",  # a comment with ] in it\n]'),
        ("[tenants . 'acme' . ap2]", "[ 'keys/acme.pem' ]"),
    ],
)
def test_rotate_rewrites_only_the_array_as_it_is_written(tmp_path: Path, header: str, array: str) -> None:
    (tmp_path / "keys").mkdir()
    write_key(tmp_path / "keys" / "acme.pem")
    path = tmp_path / "tenants.toml"
    text = (
        f'# top\n[tenants.acme]\npay_to = "{PAY_TO}"\nprice = 1\n{header}\n'
        f'merchant = {{ id = "a.example", name = "A" }}\ncheckout_keys = {array}\nrequired = false # stays\n'
    )
    path.write_text(text)
    change = rotate_key(path, "acme", now=NOW)
    assert change.key_file == tmp_path / "keys" / "acme-checkout-20261205T170000Z.pem"
    assert stat.S_IMODE(change.key_file.stat().st_mode) == 0o600
    assert change.after == ("keys/acme-checkout-20261205T170000Z.pem", *change.before)
    assert checkout_keys(path, "acme") == ["acme-checkout-20261205T170000Z.pem", "acme.pem"]
    edited = path.read_text()
    assert edited.startswith(f'# top\n[tenants.acme]\npay_to = "{PAY_TO}"\nprice = 1\n{header}\n')
    assert edited.endswith("required = false # stays\n")

    # The same second again: a name of its own, never over the first.
    again = rotate_key(path, "acme", now=NOW)
    assert again.key_file.name == "acme-checkout-20261205T170000Z-2.pem"
    assert checkout_keys(path, "acme")[0] == again.key_file.name


def test_the_default_tenant_rotates_and_retires(tmp_path: Path) -> None:
    write_key(tmp_path / "shop.pem")
    path = tmp_path / "tenants.toml"
    path.write_text(
        f'[default]\npay_to = "{PAY_TO}"\nprice = 1\n\n[default.ap2]\n'
        'merchant = { id = "shop.example", name = "Shop" }\ncheckout_keys = ["shop.pem"]\n'
    )
    change = rotate_key(path, DEFAULT_TENANT, now=NOW)
    assert change.table == "default.ap2" and change.key_file.name == "default-checkout-20261205T170000Z.pem"
    asked: list[str] = []

    def payable_of(kid: str) -> Payable:
        asked.append(kid)
        return NOTHING_PAYABLE

    retired = retire_key(path, DEFAULT_TENANT, "shop.pem", payable_of)
    assert asked == [retired.kid] and checkout_keys(path, DEFAULT_TENANT) == [change.key_file.name]


def test_retire_refuses_while_an_offer_can_be_paid_and_changes_nothing(tmp_path: Path) -> None:
    write_key(tmp_path / "acme.pem")
    path = tmp_path / "tenants.toml"
    path.write_text(
        f'[tenants.acme]\npay_to = "{PAY_TO}"\nprice = 1\n[tenants.acme.ap2]\n'
        'merchant = { id = "a.example", name = "A" }\ncheckout_keys = ["acme.pem"]\n'
    )
    rotate_key(path, "acme", now=NOW)
    before = path.read_bytes()
    with pytest.raises(Ap2KeyError, match=r"signed 2 offer\(s\) .* \(not before 2026-12-05 17:05:00 UTC\)"):
        retire_key(path, "acme", str(tmp_path / "acme.pem"), lambda kid: Payable(2, 1_796_490_300))
    with pytest.raises(Ap2KeyError, match=r"not before their payments are settled"):
        retire_key(path, "acme", "acme.pem", lambda kid: Payable(1, None))
    assert path.read_bytes() == before


def test_a_refused_edit_leaves_no_key_behind(tmp_path: Path) -> None:
    write_key(tmp_path / "acme.pem")
    path = tmp_path / "tenants.toml"
    # The array is on a dotted key the edit does not look for: it says so, and writes nothing.
    path.write_text(
        f'[tenants.acme]\npay_to = "{PAY_TO}"\nprice = 1\n'
        'ap2.merchant = { id = "a.example", name = "A" }\nap2.checkout_keys = ["acme.pem"]\n'
    )
    before = path.read_bytes()
    with pytest.raises(Ap2KeyError, match=r"set it by hand to \[\"acme-checkout-20261205T170000Z.pem\", "):
        rotate_key(path, "acme", now=NOW)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acme.pem", "tenants.toml"]
