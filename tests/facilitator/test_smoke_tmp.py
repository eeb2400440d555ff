import asyncio
from eth_account import Account
from payer import sign_payment
from tests.fixtures.facilitator import make_requirements, PAY_TO

async def test_zero_balance(chain, facilitator, new_payer):
    req = make_requirements(chain)
    relayer = Account.from_key(chain.relayer_key).address
    bal = chain.rpc.call("eth_getBalance", [relayer, "latest"])
    chain.rpc.call("anvil_setBalance", [relayer, "0x0"])
    key = new_payer()
    p = sign_payment(key, req)
    print("verify", await facilitator.verify(p, req))
    print("settle", await facilitator.settle(p, req))
    chain.rpc.call("anvil_setBalance", [relayer, bal])
    print("retry", await facilitator.settle(p, req))

async def test_nonce(chain, facilitator, new_payer):
    req = make_requirements(chain)
    relayer = Account.from_key(chain.relayer_key).address
    key = new_payer()
    print("s1", (await facilitator.settle(sign_payment(key, req), req)).success)
    n = int(chain.rpc.call("eth_getTransactionCount", [relayer, "latest"]), 16)
    chain.rpc.call("anvil_setNonce", [relayer, hex(n + 5)])
    print("s2", await facilitator.settle(sign_payment(key, req), req))
    n = int(chain.rpc.call("eth_getTransactionCount", [relayer, "latest"]), 16)
    chain.rpc.call("anvil_setNonce", [relayer, hex(n - 3)])
    print("s3", await facilitator.settle(sign_payment(key, req), req))
    print(chain.rpc.call("txpool_status"))

async def test_fifty(chain, facilitator, new_payer):
    req = make_requirements(chain)
    key = new_payer()
    p = sign_payment(key, req)
    rs = await asyncio.gather(*(facilitator.settle(p, req) for _ in range(50)))
    from collections import Counter
    print(Counter((r.success, r.error_reason, r.transaction) for r in rs))
    print(rs[1])
