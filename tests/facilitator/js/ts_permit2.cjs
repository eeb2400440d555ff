// Permit2 payments made by the x402 TypeScript SDK's client (tests/facilitator/test_permit2_rules.py).
//
// Reads {privateKey, paymentRequired} as JSON on stdin: an x402 v2 PaymentRequired whose offers are an
// `exact` one with `assetTransferMethod: "permit2"` and an `upto` one. The SDK's x402Client, with its exact
// and upto EVM schemes registered on a viem account, makes a payment for each offer in turn. Prints the
// payment payloads as a JSON array, in the offers' order. Nothing is sent anywhere.
"use strict";

const { x402Client } = require("@x402/core/client");
const { registerExactEvmScheme } = require("@x402/evm/exact/client");
const { UptoEvmScheme } = require("@x402/evm/upto/client");
const { privateKeyToAccount } = require("viem/accounts");

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function main() {
  const { privateKey, paymentRequired } = await readStdin();
  const account = privateKeyToAccount(privateKey);
  const payments = [];
  for (const offer of paymentRequired.accepts) {
    // The SDK pays only tokens it knows (real USDC deployments) unless told of others.
    const allowed = { network: offer.network, asset: offer.asset, maxAmountPerPayment: offer.amount };
    const client = x402Client.fromConfig({ schemes: [], spendControls: { allowedAssets: [allowed] } });
    registerExactEvmScheme(client, { signer: account });
    client.register("eip155:*", new UptoEvmScheme(account));
    payments.push(await client.createPaymentPayload({ ...paymentRequired, accepts: [offer] }));
  }
  process.stdout.write(JSON.stringify(payments, (_, value) => (typeof value === "bigint" ? value.toString() : value)));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
