"""A settlement's recorded answer: the caller whose answer was stored is handed the model it built, a
replay gets the stored JSON parsed back, and the two are always the same answer."""

from __future__ import annotations

import orjson
import pytest

from a2a_x402.facilitator._answers import Answers
from a2a_x402.facilitator._found import ThirdPartySettlement
from a2a_x402.facilitator.wire import Reason, SettleResponse

NETWORK = "eip155:84532"
PAYER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
TX_HASH = "0x" + "1f" * 32
ANSWERS = Answers(NETWORK)

# One of each kind the facilitator records: a success as `ClaimRecords.success` builds it, a refusal, a
# pending answer and a refusal naming someone else's settlement.
RECORDED = [
    SettleResponse(
        success=True,
        payer=PAYER,
        transaction=TX_HASH,
        network=NETWORK,
        amount=10**30 + 7,
        extensions={"settlement": {"blockNumber": 12, "confirmations": 1}},
    ),
    ANSWERS.failure(
        Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE, "the payer's balance is below the amount", PAYER
    ),
    ANSWERS.failure(Reason.SETTLEMENT_PENDING, "not yet confirmed", PAYER, transaction=TX_HASH),
    ANSWERS.used_elsewhere(PAYER, ThirdPartySettlement(TX_HASH, 9, "0x" + "2e" * 32, PAYER)),
    ANSWERS.used_elsewhere(
        PAYER, ThirdPartySettlement(TX_HASH, 9, "0x" + "2e" * 32, PAYER), message="not sent here"
    ),
]


@pytest.mark.parametrize(
    "answer", RECORDED, ids=["success", "refused", "pending", "used-elsewhere", "foreign"]
)
def test_a_recorded_answer_read_back_from_its_stored_json_is_the_same_answer(answer: SettleResponse) -> None:
    stored = orjson.loads(orjson.dumps(answer.to_json_dict()))  # what the claim's JSON column gives back

    replayed = SettleResponse.from_wire(stored)

    assert replayed == answer
    assert replayed.to_json_dict() == stored
