"""`spec.build`: the Markdown, the example files and the generated tables are in step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

import spec.build
from a2a_x402.agentcard import CardVerifier, SignaturePolicy, parse_jwks
from a2a_x402.conformance import CHECKS, CheckSpec, Level, Scope
from spec import read_examples
from spec.build import (
    CARD_EXAMPLE,
    EXAMPLES_DIR,
    JWKS_EXAMPLE,
    KIT_SCHEMA_DIR,
    SCHEMA_DIR,
    SPEC_PATH,
    build,
    main,
    make_ap2_v02_examples,
    sign_card_example,
)


def test_the_specification_is_in_step() -> None:
    # The one check CI needs: blocks canonical, tables rendered from a2a_x402, files equal to blocks.
    assert build(check=True) == []


def test_every_example_file_is_its_block() -> None:
    blocks = {example.name: example.text for example in read_examples(SPEC_PATH.read_text(encoding="utf-8"))}
    files = {path.name: path.read_text(encoding="utf-8") for path in EXAMPLES_DIR.glob("*.json")}
    assert files == blocks


@pytest.fixture
def copy(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the specification and its examples to break."""
    spec_path = tmp_path / SPEC_PATH.name
    shutil.copy(SPEC_PATH, spec_path)
    examples_dir = tmp_path / "examples"
    shutil.copytree(EXAMPLES_DIR, examples_dir)
    return spec_path, examples_dir


def test_check_reports_and_build_repairs(copy: tuple[Path, Path]) -> None:
    spec_path, examples_dir = copy
    (examples_dir / "payment-required.request.json").write_text("{}\n", encoding="utf-8")
    (examples_dir / "orphan.json").write_text("{}\n", encoding="utf-8")
    (examples_dir / "jwks.json").unlink()
    markdown = spec_path.read_text(encoding="utf-8")
    assert "| **Roles** |" in markdown
    spec_path.write_text(markdown.replace("| **Roles** |", "| **Rollen** |", 1), encoding="utf-8")

    problems = build(spec_path, examples_dir, check=True)
    assert problems == [
        "v0.3.md: example blocks or generated tables are not up to date",
        "examples/jwks.json: differs from its block in v0.3.md",
        "examples/payment-required.request.json: differs from its block in v0.3.md",
        "examples/orphan.json: no block in v0.3.md has this name",
    ]
    assert (examples_dir / "orphan.json").exists()

    assert build(spec_path, examples_dir, check=False) == problems
    assert build(spec_path, examples_dir, check=True) == []
    assert spec_path.read_text(encoding="utf-8") == SPEC_PATH.read_text(encoding="utf-8")
    assert not (examples_dir / "orphan.json").exists()


def test_build_writes_blocks_in_canonical_form(copy: tuple[Path, Path]) -> None:
    spec_path, examples_dir = copy
    markdown = spec_path.read_text(encoding="utf-8")
    block = next(e for e in read_examples(markdown) if e.name == "payment-rejected.request.json")
    squeezed = json.dumps(block.document) + "\n"
    spec_path.write_text(markdown[: block.start] + squeezed + markdown[block.end :], encoding="utf-8")
    assert build(spec_path, examples_dir, check=False) == [
        "v0.3.md: example blocks or generated tables are not up to date"
    ]
    assert spec_path.read_text(encoding="utf-8") == SPEC_PATH.read_text(encoding="utf-8")


async def test_sign_card_example_signs_with_a_published_key(copy: tuple[Path, Path]) -> None:
    spec_path, _ = copy
    before = {e.name: e.document for e in read_examples(spec_path.read_text(encoding="utf-8"))}
    sign_card_example(spec_path)
    after = {e.name: e.document for e in read_examples(spec_path.read_text(encoding="utf-8"))}
    assert after[JWKS_EXAMPLE] != before[JWKS_EXAMPLE]
    assert {k: v for k, v in after[CARD_EXAMPLE].items() if k != "signatures"} == {
        k: v for k, v in before[CARD_EXAMPLE].items() if k != "signatures"
    }
    verifier = CardVerifier(
        trusted_keys=parse_jwks(after[JWKS_EXAMPLE]).values(), policy=SignaturePolicy.REQUIRE
    )
    assert (await verifier.verify(after[CARD_EXAMPLE])).verified
    assert not (
        await CardVerifier(trusted_keys=parse_jwks(before[JWKS_EXAMPLE]).values()).verify(after[CARD_EXAMPLE])
    ).verified


def test_ap2_v02_examples_are_made_afresh_beside_the_kept_keys(copy: tuple[Path, Path]) -> None:
    pytest.importorskip(
        "ap2.models.mandate", reason="the AP2 SDK is not installed (scripts/setup installs it)"
    )
    from a2a_x402.merchant.ap2 import IssuerKeys, cart_digest, verify_user_authorization

    spec_path, _ = copy
    before = {e.name: e.document for e in read_examples(spec_path.read_text(encoding="utf-8"))}
    make_ap2_v02_examples(spec_path)
    after = {e.name: e.document for e in read_examples(spec_path.read_text(encoding="utf-8"))}
    made = {"ap2.v0.2.payment-required.response.json", "ap2.v0.2.payment-submitted.request.json"}
    jwks = {"ap2.checkout-keys.json", "ap2.issuer-keys.json"}
    assert {name for name in after if after[name] != before[name]} == made | jwks
    for name in jwks:
        # The first key, which the A2A 1.0 examples use, is kept; the second is new and public only.
        kept, new = after[name]["keys"]
        assert kept == before[name]["keys"][0] and new != before[name]["keys"][1] and "d" not in new
    [artifact] = after["ap2.v0.2.payment-required.response.json"]["result"]["artifacts"]
    cart = artifact["parts"][0]["data"]["ap2.mandates.CartMandate"]
    claims = jwt.decode(
        cart["merchant_authorization"], KeySet.import_key_set(after["ap2.checkout-keys.json"])
    ).claims
    assert claims["cart_hash"] == cart_digest(cart["contents"])
    message = after["ap2.v0.2.payment-submitted.request.json"]["params"]["message"]
    mandate = message["parts"][1]["data"]["ap2.mandates.PaymentMandate"]
    hashes = verify_user_authorization(
        mandate["user_authorization"],
        IssuerKeys.from_jwks(after["ap2.issuer-keys.json"]),
        audience=claims["sub"],
        nonce=claims["jti"],
        not_before=claims["iat"],
        now=claims["iat"] + 60,
    )
    assert hashes == (cart_digest(cart), cart_digest(mandate["payment_mandate_contents"]))


def test_main_check_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit):
        main(["--check", "--sign-card"])


def test_the_check_list_is_the_kits(copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # A check added to the kit but not to the specification (or the reverse) puts them out of step.
    spec_path, examples_dir = copy
    extra = CheckSpec(
        "card.extra", Level.MAY, Scope.CARD, "3", "A check the specification does not list yet."
    )
    monkeypatch.setattr(spec.build, "CHECKS", (*CHECKS, extra))
    assert build(spec_path, examples_dir, check=True) == [
        "v0.3.md: example blocks or generated tables are not up to date"
    ]
    build(spec_path, examples_dir, check=False)
    assert "| `card.extra` | MAY | card | [3](#3-declaration-in-the-agent-card) |" in spec_path.read_text(
        encoding="utf-8"
    )


def test_the_kits_schemas_are_copies_of_the_specifications(copy: tuple[Path, Path], tmp_path: Path) -> None:
    spec_path, examples_dir = copy
    kit_schemas = tmp_path / "kit-schema"
    shutil.copytree(KIT_SCHEMA_DIR, kit_schemas)
    (kit_schemas / "card-params.json").write_text("{}\n", encoding="utf-8")
    (kit_schemas / "common.json").unlink()
    options = {"schema_dir": SCHEMA_DIR, "kit_schema_dir": kit_schemas}
    assert build(spec_path, examples_dir, check=True, **options) == [
        "a2a_x402/conformance/schema/card-params.json: differs from schema/card-params.json",
        "a2a_x402/conformance/schema/common.json: differs from schema/common.json",
    ]
    build(spec_path, examples_dir, check=False, **options)
    assert build(spec_path, examples_dir, check=True, **options) == []
    assert (kit_schemas / "card-params.json").read_bytes() == (SCHEMA_DIR / "card-params.json").read_bytes()
