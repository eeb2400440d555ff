"""The merchant SIGKILLed at each step of settling a paid turn by `exact` by Permit2 (the dev chain's plain
ERC-20, which has no EIP-3009), then restarted on the same database (`crashes`). After the restart the
client, polling its task, sees it completed; the payee was paid once, through the exact proxy, and that
payment is booked once (found on chain by the proxy call's permit), and the invariants hold.
"""

from __future__ import annotations

import pytest

from .conftest import Scenario
from .crashes import STEPS, completed_after_a_restart, killed_at
from .payments import PERMIT2


@pytest.mark.parametrize("step", STEPS)
async def test_a_merchant_killed_mid_permit2_settlement_finishes_the_paid_turn_after_a_restart(
    step: str,
    scenario: Scenario,
) -> None:
    merchant, task_id, _ = await killed_at(step, scenario, PERMIT2)

    await completed_after_a_restart(merchant, task_id, scenario, PERMIT2)
