// A Permit2 payment (`exact` by Permit2, or `upto`) made and settled by the x402 TypeScript SDK end to end,
// with our facilitator behind its HTTPFacilitatorClient (tests/facilitator/test_app_ts_permit2.py).
//
// Reads {facilitatorUrl, rpcUrl, privateKey, offer, declared, charge} as JSON on stdin. The SDK's resource
// server (x402ResourceServer with the exact and upto EVM server schemes) learns what the facilitator
// supports from our /supported and builds the offer's requirements (`offer`: {scheme, network, asset,
// amount, payTo, extra}); `declared` (optional) are the extensions its PaymentRequired declares.
// The SDK's client (x402Client with its exact and upto EVM client schemes on a viem account, given the
// RPC URL to read the token's EIP-2612 nonce and the Permit2 allowance) pays it. The resource server then
// verifies it and settles it through our /verify and /settle; `charge` (atomic units, optional) is the
// settlement override an `upto` server passes for what the work used. Finally the same payment is settled
// once more straight through the HTTPFacilitatorClient (a replay). Prints {paymentRequired,
// paymentPayload, verified, settled, replayed}: each answer as the SDK returned it, or
// {thrown: {name, message, reason}} when the SDK threw instead (a VerifyError or SettleError names our reason).
"use strict";

const { x402Client } = require("@x402/core/client");
const { HTTPFacilitatorClient } = require("@x402/core/http");
const { x402ResourceServer } = require("@x402/core/server");
const { ExactEvmScheme: ExactClient } = require("@x402/evm/exact/client");
const { ExactEvmScheme: ExactServer } = require("@x402/evm/exact/server");
const { UptoEvmScheme: UptoClient } = require("@x402/evm/upto/client");
const { UptoEvmScheme: UptoServer } = require("@x402/evm/upto/server");
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
    const reason = error.errorReason ?? error.invalidReason ?? null;
    return { thrown: { name: error.name, message: error.message, reason } };
  }
}

async function main() {
  const { facilitatorUrl, rpcUrl, privateKey, offer, declared, charge } = await readStdin();
  const facilitator = new HTTPFacilitatorClient({ url: facilitatorUrl, timeoutMs: 60000 });
  const server = new x402ResourceServer(facilitator);
  server.register(offer.network, new ExactServer());
  server.register(offer.network, new UptoServer());
  await server.initialize();
  const requirements = await server.buildPaymentRequirements({
    scheme: offer.scheme,
    network: offer.network,
    payTo: offer.payTo,
    price: { amount: offer.amount, asset: offer.asset, extra: offer.extra },
    maxTimeoutSeconds: 120,
  });
  const resource = { url: "https://merchant.example/report", description: "a report", mimeType: "text/plain" };
  const paymentRequired = await server.createPaymentRequiredResponse(
    requirements,
    resource,
    undefined,
    declared ?? undefined,
  );

  const account = privateKeyToAccount(privateKey);
  // The SDK pays only tokens it knows (real USDC deployments) unless told of others.
  const allowed = { network: offer.network, asset: offer.asset, maxAmountPerPayment: offer.amount };
  const client = x402Client.fromConfig({ schemes: [], spendControls: { allowedAssets: [allowed] } });
  client.register(offer.network, new ExactClient(account, { rpcUrl }));
  client.register(offer.network, new UptoClient(account, { rpcUrl }));
  const paymentPayload = await client.createPaymentPayload(paymentRequired);

  const matched = server.findMatchingRequirements(paymentRequired.accepts, paymentPayload);
  const verified = await answer(() => server.verifyPayment(paymentPayload, matched));
  const overrides = charge === undefined || charge === null ? undefined : { amount: charge };
  const settled = await answer(() => server.settlePayment(paymentPayload, matched, undefined, undefined, overrides));
  const charged = overrides ? { ...matched, amount: charge } : matched;
  const replayed = await answer(() => facilitator.settle(paymentPayload, charged));
  const out = { paymentRequired, paymentPayload, verified, settled, replayed };
  process.stdout.write(JSON.stringify(out, (_, value) => (typeof value === "bigint" ? value.toString() : value)));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
