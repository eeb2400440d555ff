"""Dashboard sessions: issued for one tenant's token, checked in constant time, ending with the token."""

from __future__ import annotations

from merchant.dashboard import DashboardAuth

NOW = 1_800_000_000.0


def _auth(tokens: dict[str, str]) -> DashboardAuth:
    return DashboardAuth(tokens.get, session_ttl_s=3600)


def test_a_session_is_valid_for_its_tenant_only_until_it_expires() -> None:
    auth = _auth({"acme": "acme-token-0123456789", "globex": "globex-token-0123456789"})
    session = auth.new_session("acme", now=NOW)

    assert auth.session_matches("acme", session, now=NOW + 3599)
    assert not auth.session_matches("acme", session, now=NOW + 3600)
    assert not auth.session_matches("globex", session, now=NOW)
    assert "acme-token" not in session  # the cookie is not the token


def test_a_new_token_ends_every_session_and_forged_values_fail() -> None:
    tokens = {"acme": "acme-token-0123456789"}
    auth = _auth(tokens)
    session = auth.new_session("acme", now=NOW)
    expires, _, mac = session.partition(".")
    forged = [
        "",
        "garbage",
        f"{int(expires) + 100}.{mac}",  # a later expiry under the old signature
        f"{expires}.{mac[:-1]}",
        f"{expires}.",
        f"²{expires}.{mac}",  # digits isdigit() takes but int() refuses
        "9" * 40 + "." + mac,
    ]

    assert all(not auth.session_matches("acme", value, now=NOW) for value in forged)
    tokens["acme"] = "a-rotated-token-0123456789"
    assert not auth.session_matches("acme", session, now=NOW)


def test_tokens_match_exactly_and_a_tenant_without_one_has_no_way_in() -> None:
    auth = _auth({"acme": "acme-token-0123456789"})

    assert auth.token_matches("acme", "acme-token-0123456789")
    assert not auth.token_matches("acme", "acme-token-012345678")
    assert not auth.token_matches("acme", None)
    assert not auth.token_matches("nobody", "acme-token-0123456789")
    assert not auth.session_matches("nobody", "1.abc", now=NOW)
