"""The authorization's window follows the x402 SDKs: valid from ten minutes before signing (`now - 600`,
as `@x402/evm` signs), so a node judging validity at an older block's time still finds it open."""

from __future__ import annotations

import time

from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.payer import VALID_AFTER_BACKDATE_S, sign_payment
from tests.fixtures.facilitator import make_requirements


def test_valid_after_is_backdated_as_the_sdks_do(chain: DevChain) -> None:
    requirements = make_requirements(chain)
    before = int(time.time())
    authorization = sign_payment(Account.create().key.to_0x_hex(), requirements).payload.authorization
    after = int(time.time())

    assert VALID_AFTER_BACKDATE_S == 600
    assert before - 600 <= authorization.valid_after <= after - 600
    assert before + requirements.max_timeout_seconds <= authorization.valid_before
    assert authorization.valid_before <= after + requirements.max_timeout_seconds


def test_an_explicit_window_is_kept(chain: DevChain) -> None:
    requirements = make_requirements(chain)
    signed = sign_payment(Account.create().key.to_0x_hex(), requirements, valid_after=5, valid_before=99)

    assert (signed.payload.authorization.valid_after, signed.payload.authorization.valid_before) == (5, 99)
