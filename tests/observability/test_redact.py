"""No secret and no payment signature in a log line, whoever logs it (issue 25): the shapes `redact`
recognizes, the values a service registers, the dependencies kept above DEBUG, and the settings' secrets."""

from __future__ import annotations

import logging
import secrets

import pytest
from pydantic import SecretStr
from pydantic_settings import BaseSettings

from a2a_x402.observability import (
    REDACTED,
    LogSettings,
    configure_logging,
    redact,
    redact_values,
    settings_secrets,
)

SIGNATURE = "0x" + "a3" * 65
TX_HASH = "0x" + "cd" * 32


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        (f"INSERT ... ('acme', 'https://hook', 'whsec_{'Q' * 43}=')", "INSERT ... ('acme', 'https://hook', "),
        ("Authorization: Bearer acme-0123456789abcdef", "Authorization: "),
        ("{'authorization': 'Bearer acme-0123456789abcdef'}", "{'authorization': '"),
        ("got Bearer acme-0123456789abcdef from", "got Bearer "),
        ("token=acme-0123456789abcdef&x=1", "token="),
        ('{"api_token": "acme-0123456789abcdef"}', '{"api_token": "'),
        ("X402_RELAYER_KEY=0x" + "11" * 32, "X402_RELAYER_KEY="),
        ("secret=SecretStr('hunter2hunter2')", "secret=SecretStr('"),
        ("postgresql+asyncpg://x402:hunter2hunter2@db:5432/x402", "postgresql+asyncpg://x402:"),
        (f"payload {{'signature': '{SIGNATURE}'}}", "payload {'signature': '"),
        (f'string_value: "{SIGNATURE}"', 'string_value: "0x'),
        (
            f"wrapped {SIGNATURE}{'00' * 64}6492649264926492649264926492649264926492649264926492649264926492",
            "wrapped ",
        ),
    ],
)
def test_secret_shapes_are_redacted(line: str, kept: str) -> None:
    redacted = redact(line)

    assert REDACTED in redacted and redacted.startswith(kept)
    assert "hunter2" not in redacted and "0123456789abcdef" not in redacted and "a3a3a3a3" not in redacted
    assert "QQQQQQQQ" not in redacted and "1111111111" not in redacted


def test_public_values_and_ordinary_words_stay() -> None:
    lines = [
        f"settled {TX_HASH} in block 12",  # 32-byte hashes are public and what operators follow
        "payer 0x976EA74026E726554dB657fA54763abd0C3a0aa9",
        "the token was refused; tokens: 5",
        "GET /tenants/acme/dashboard 200",
    ]

    assert [redact(line) for line in lines] == lines


def test_registered_values_are_redacted_with_and_without_their_0x() -> None:
    token, key = secrets.token_urlsafe(24), "0x" + secrets.token_hex(32)
    redact_values([token, key, None, "short"])

    assert redact(f"a {token} b {key} c {key.removeprefix('0x')} short") == (
        f"a {REDACTED} b {REDACTED} c {REDACTED} short"
    )


def test_settings_secrets_are_every_secret_field_its_pieces_and_url_passwords() -> None:
    class Settings(BaseSettings):
        relayer_keys: SecretStr = SecretStr("0x" + "ab" * 32 + ",0x" + "cd" * 32)
        database_url: str = "postgresql://x402:pw-0123456789@db/x402"
        rpc_url: str = "http://127.0.0.1:8545"
        name: str = "not a secret"

    found = settings_secrets(Settings())

    assert {"0x" + "ab" * 32, "0x" + "cd" * 32, "pw-0123456789"} <= set(found)
    assert "not a secret" not in found and "http://127.0.0.1:8545" not in found


def test_at_debug_the_dependencies_that_dump_sql_and_bodies_stay_quiet_and_every_line_is_redacted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(LogSettings(log_level="DEBUG", _env_file=None))
    logging.getLogger("sqlalchemy.engine.Engine").info("INSERT ... [generated in 0.0001s] ('whsec_x')")
    logging.getLogger("aiosqlite").debug("executing ... ('whsec_y')")
    logging.getLogger("a2a.server.routes.jsonrpc_dispatcher").debug("Request body: {...}")
    logging.getLogger("sd_jwt.verifier").debug("Disclosed claims: {...}")
    logging.getLogger("merchant.test").debug("ours at DEBUG, with %s", SIGNATURE)
    logging.getLogger("a2a.server").warning("a warning with Bearer acme-0123456789abcdef")
    try:
        raise ValueError(f"refused {SIGNATURE}")
    except ValueError:
        logging.getLogger("merchant.test").exception("failed")

    err = capsys.readouterr().err
    assert "INSERT" not in err and "executing" not in err and "Request body" not in err
    assert "Disclosed claims" not in err
    assert "ours at DEBUG, with 0x" + REDACTED in err
    assert f"a warning with Bearer {REDACTED}" in err
    assert "a3a3a3a3" not in err and "0123456789abcdef" not in err and "ValueError: refused 0x" in err
