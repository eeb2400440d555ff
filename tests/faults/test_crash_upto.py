"""The merchant SIGKILLed at each step of settling a metered (`upto`) paid turn, then restarted on the same
database (`crashes`).

The work used less than the payer signed for: after the restart the payee was paid what it used, once,
booked once for that amount with the maximum beside it, and the client's completed task says so. A turn
whose work used nothing settles 0 and sends nothing: killed before its claim, or after its offer was
recorded paid and before the task was told, it is completed after the restart with nothing moved, sent or
booked, its permit left unspent. The invariants hold throughout.
"""

from __future__ import annotations

import pytest

from .conftest import Scenario
from .crashes import STEPS, completed_after_a_restart, killed_at
from .payments import UPTO, UPTO_NOTHING


@pytest.mark.parametrize("step", STEPS)
async def test_a_merchant_killed_mid_metered_settlement_settles_the_usage_after_a_restart(
    step: str,
    scenario: Scenario,
) -> None:
    merchant, task_id, _ = await killed_at(step, scenario, UPTO)

    await completed_after_a_restart(merchant, task_id, scenario, UPTO)


@pytest.mark.parametrize(
    "step",
    [
        pytest.param("settling", id="after the work, before the claim"),
        pytest.param("outbox", id="after the offer was recorded paid, before the task is told"),
    ],
)
async def test_a_merchant_killed_settling_a_metered_turn_that_used_nothing_completes_it_charging_nothing(
    step: str,
    scenario: Scenario,
) -> None:
    merchant, task_id, stop = await killed_at(step, scenario, UPTO_NOTHING)

    await completed_after_a_restart(merchant, task_id, scenario, UPTO_NOTHING)
    assert not stop.used_on_chain()
