// The x402 TypeScript SDK's client paying through our facilitator (tests/facilitator/test_app_ts_client.py).
//
// Reads {facilitatorUrl, privateKey, paymentRequired} as JSON on stdin. The SDK's x402Client with the exact
// EVM scheme registered on a viem account (as its README does it) makes the payment for the x402 v2
// PaymentRequired; the SDK's HTTPFacilitatorClient then sends it to our facilitator's /verify and /settle,
// and settles it once more (a replay). Prints {paymentPayload, verified, settled, replayed} as JSON: each
// answer as the SDK parsed it, or {thrown: {name, message, response}} when the SDK threw instead.
"use strict";

const { x402Client } = require("@x402/core/client");
const { HTTPFacilitatorClient } = require("@x402/core/http");
const { registerExactEvmScheme } = require("@x402/evm/exact/client");
const { privateKeyToAccount } = require("viem/accounts");

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function answer(call) {
  try {
    return await call();
  } catch (error) {
    return { thrown: { name: error.name, message: error.message, response: error.response ?? null } };
  }
}

async function main() {
  const { facilitatorUrl, privateKey, paymentRequired } = await readStdin();
  const [requirements] = paymentRequired.accepts;
  // The SDK pays only tokens it knows (real USDC deployments) unless told of others: the dev token is
  // allowed by name, capped at the amount asked.
  const allowed = {
    network: requirements.network,
    asset: requirements.asset,
    maxAmountPerPayment: requirements.amount,
  };
  const client = x402Client.fromConfig({ schemes: [], spendControls: { allowedAssets: [allowed] } });
  registerExactEvmScheme(client, { signer: privateKeyToAccount(privateKey) });
  const paymentPayload = await client.createPaymentPayload(paymentRequired);
  const facilitator = new HTTPFacilitatorClient({ url: facilitatorUrl, timeoutMs: 60000 });
  const verified = await answer(() => facilitator.verify(paymentPayload, requirements));
  const settled = await answer(() => facilitator.settle(paymentPayload, requirements));
  const replayed = await answer(() => facilitator.settle(paymentPayload, requirements));
  const out = { paymentPayload, verified, settled, replayed };
  process.stdout.write(JSON.stringify(out, (_, value) => (typeof value === "bigint" ? value.toString() : value)));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
