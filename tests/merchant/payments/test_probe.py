from __future__ import annotations
import json, time
from payer import sign_payment
from tests.fixtures.merchant import MerchantWire, user_message, payment_message, offered_terms, A2ACallError

async def show(coro):
    try:
        r = await coro
        print("OK", json.dumps(r)[:600])
        return r
    except A2ACallError as e:
        print("ERR", e)

async def test_probe(start_merchant, sqlite_url, chain):
    m = start_merchant(sqlite_url)
    async with m.http() as http, m.http(extensions=None) as plain:
        for b in ("jsonrpc","rest"):
            print("=====", b)
            w = MerchantWire(http, b)
            task = (await w.send(user_message()))["task"]
            p = sign_payment(chain.payer_keys[0], offered_terms(task).accepts[0])
            print("-- ctx mismatch"); await show(w.send(payment_message(task["id"], p, context_id="other-ctx")))
            print("-- unknown task"); await show(w.send(payment_message("0b6c3d4e-1111-2222-3333-444455556666", p)))
            print("-- no activation"); await show(MerchantWire(plain, b).send(user_message()))
            print("-- stream pay")
            evs = await w.stream(payment_message(task["id"], p))
            for e in evs: print("  ", json.dumps(e)[:300])
            print("-- second pay"); await show(w.send(payment_message(task["id"], p)))
            print("-- stream priced")
            evs = await w.stream(user_message())
            for e in evs: print("  ", json.dumps(e)[:300])
            print("-- big"); await show(w.send(user_message("x"*70000)))
            print("-- malformed"); await show(w.send(user_message("m", task_id=task["id"], metadata={"https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.3": {"status": "payment-submitted"}})))
