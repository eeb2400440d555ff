"""The kit's one door to the AP2 SDK (``ap2``, an optional extra): keys, open mandates, closing hops.

The kit plays the user's Trusted Surface (with the issuer key the operator gives, or a key of its own for
the untrusted-issuer check) and the client's agent, so it issues open mandates and closes them over a round
as AP2 v0.2 does. The SDK is imported on first use, never at module import, so that a run without it still
checks everything but the mandates; before anything of it runs, its file log is pointed at ``os.devnull``
(it appends whole presentation tokens to a file inside its install). Claims go to the SDK as plain JSON,
so that the kit can also present the wrong ones its checks need. No SDK type leaves this module except as
an opaque key, and no token or key is put in an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from typing import Any, NamedTuple

__all__ = ["Ap2SdkError", "generate_key", "import_key", "issue", "present", "public_jwk", "sdk_problem"]

INSTALL_HINT = (
    "the AP2 SDK is not installed: install it with `pip install --no-deps` from the AP2 repository, then "
    "`pip install 'a2a-x402-merchant[ap2]'` (docs/conformance.md)"
)


class Ap2SdkError(Exception):
    """The SDK is missing, or refused to make a key or mandate (one line, no token material)."""


class _Sdk(NamedTuple):
    client: Any
    jwk: Any
    claims: Any


@cache
def _sdk() -> _Sdk:
    try:
        import ap2.sdk.mandate as mandate
    except ImportError:
        raise Ap2SdkError(INSTALL_HINT) from None
    mandate.LOG_FILE_PATH = os.devnull
    import jwcrypto.jwk as jwk
    from pydantic import BaseModel, ConfigDict

    class Claims(BaseModel):
        """Claims already in their JSON form, dumped as they are."""

        model_config = ConfigDict(extra="allow")

    return _Sdk(mandate.MandateClient(), jwk, Claims)


def sdk_problem() -> str:
    """Why the kit cannot issue mandates (``""``: the SDK is there)."""
    try:
        _sdk()
    except Ap2SdkError as missing:
        return str(missing)
    return ""


def generate_key(kid: str) -> Any:
    """A fresh EC P-256 key named ``kid`` (opaque)."""
    return _sdk().jwk.JWK.generate(kty="EC", crv="P-256", kid=kid)


def import_key(members: Mapping[str, str]) -> Any:
    """The private EC P-256 JWK of ``members`` (opaque).

    Raises:
        Ap2SdkError: the members are no usable EC P-256 private key.
    """
    try:
        key = _sdk().jwk.JWK(**dict(members))
        key.get_op_key("sign")
    except Ap2SdkError:
        raise
    except Exception:  # jwcrypto and cryptography raise several types; none may repeat the key
        raise Ap2SdkError("the issuer key is not a usable EC P-256 private JWK") from None
    return key


def public_jwk(key: Any) -> dict[str, Any]:
    """The public members of ``key``."""
    public: dict[str, Any] = json.loads(key.export_public())
    return public


def issue(issuer_key: Any, claims: Mapping[str, Any]) -> str:
    """An open mandate of ``claims`` (taken as they are, none selectively disclosed) signed by
    ``issuer_key``.

    Raises:
        Ap2SdkError: the SDK refused the claims.
    """
    sdk = _sdk()
    try:
        token: str = sdk.client.create([sdk.claims(**claims)], issuer_key)
    except Exception as error:  # the SDK's words are about the claims' form, never the key
        raise Ap2SdkError(f"the AP2 SDK could not issue a mandate: {type(error).__name__}") from None
    return token


def present(agent_key: Any, open_token: str, claims: Mapping[str, Any], *, aud: str, nonce: str) -> str:
    """The chain of ``open_token`` and a closing hop of ``claims`` that ``agent_key`` signs for ``aud`` and
    ``nonce`` (every disclosure of the open mandate kept).

    Raises:
        Ap2SdkError: the SDK refused to close the mandate.
    """
    sdk = _sdk()
    try:
        token: str = sdk.client.present(agent_key, open_token, [sdk.claims(**claims)], nonce=nonce, aud=aud)
    except Exception as error:  # the SDK's words are about the token's form, never the key
        raise Ap2SdkError(f"the AP2 SDK could not close a mandate: {type(error).__name__}") from None
    return token
