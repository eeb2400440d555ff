"""The merchant SIGKILLed at each step of settling a paid turn made with AP2 mandates (the embedded flow,
§20; EIP-3009 underneath), then restarted on the same database (`crashes`).

The mandates were accepted and their use counted with the payment's presentation, before the merchant
was killed. After the restart the client, polling its task, sees it completed; the payee was paid once,
booked once with the round's AP2 references, and the open mandate counts that one payment once, whatever
recovery went through (invariant 8).
"""

from __future__ import annotations

import pytest

from .conftest import Scenario
from .crashes import STEPS, completed_after_a_restart, killed_at
from .payments import AP2

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)


@pytest.mark.parametrize("step", STEPS)
async def test_a_merchant_killed_mid_ap2_settlement_finishes_the_paid_turn_counted_once_after_a_restart(
    step: str,
    scenario: Scenario,
) -> None:
    merchant, task_id, _ = await killed_at(step, scenario, AP2)

    await completed_after_a_restart(merchant, task_id, scenario, AP2)
