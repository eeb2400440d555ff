// An x402 HTTP resource paid with `@x402/fetch` and settled through our facilitator
// (tests/facilitator/test_app_ts_fetch.py).
//
// Reads {facilitatorUrl, rpcUrl, privateKey, offer, declared, charge} as JSON on stdin. It serves one paid
// route, `GET /report`, on 127.0.0.1 with the x402 TypeScript SDK's HTTP resource server
// (x402HTTPResourceServer over x402ResourceServer with the exact and upto EVM server schemes, our
// facilitator behind its HTTPFacilitatorClient), priced by `offer` ({scheme, network, asset, amount, payTo,
// extra}) and declaring the extensions `declared` (optional: the EIP-2612 permit of Permit2 a payer may
// send beside). The handler answers the report and, when `charge` (atomic units) is given, names it in the
// SDK's `Settlement-Overrides` response header: what an `upto` resource's work used. The buyer is
// `wrapFetchWithPayment(fetch, x402Client)` from `@x402/fetch`, with @x402/evm's exact (Permit2 when the
// terms ask for it) and upto client schemes on a viem account: it fetches the route, meets the 402, pays,
// and fetches again. Then the very PAYMENT-SIGNATURE header the resource was paid with is sent once more
// with the plain fetch (a replay). Prints {paymentRequired, paymentPayload, status, body, paymentResponse,
// replay: {status, error}, requests}: the 402's terms and the payment as the resource server received
// them, the paid answer and its decoded PAYMENT-RESPONSE, what the replay was answered (the error its 402
// names), and the number of requests the resource saw.
"use strict";

const http = require("node:http");

const { wrapFetchWithPayment, decodePaymentResponseHeader, x402Client } = require("@x402/fetch");
const {
  HTTPFacilitatorClient,
  SETTLEMENT_OVERRIDES_HEADER,
  decodePaymentRequiredHeader,
  decodePaymentSignatureHeader,
  x402HTTPResourceServer,
} = require("@x402/core/http");
const { x402ResourceServer } = require("@x402/core/server");
const { ExactEvmScheme: ExactClient } = require("@x402/evm/exact/client");
const { ExactEvmScheme: ExactServer } = require("@x402/evm/exact/server");
const { UptoEvmScheme: UptoClient } = require("@x402/evm/upto/client");
const { UptoEvmScheme: UptoServer } = require("@x402/evm/upto/server");
const { privateKeyToAccount } = require("viem/accounts");

const REPORT = "the report";

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

// The SDK's framework-agnostic view of one node:http request (what its Express and Hono adapters give).
function adapterOf(request, baseUrl) {
  const url = new URL(request.url, baseUrl);
  const header = (name) => {
    const value = request.headers[name.toLowerCase()];
    return Array.isArray(value) ? value.join(", ") : value;
  };
  return {
    getHeader: header,
    getMethod: () => request.method,
    getPath: () => url.pathname,
    getUrl: () => url.href,
    getAcceptHeader: () => header("accept") ?? "",
    getUserAgent: () => header("user-agent") ?? "",
  };
}

function write(response, { status, headers, body }) {
  const text = typeof body === "string" ? body : JSON.stringify(body ?? {});
  response.writeHead(status, headers);
  response.end(text);
}

// The paid route: 402 with the terms, or the report after the payment verified, settled once it is ready.
function handlerOf(resource, charge, seen) {
  return async (request, response, baseUrl) => {
    seen.requests += 1;
    const adapter = adapterOf(request, baseUrl);
    const context = { adapter, path: adapter.getPath(), method: adapter.getMethod() };
    const signature = adapter.getHeader("payment-signature");
    if (signature) seen.signatures.push(signature);
    const result = await resource.processHTTPRequest(context);
    if (result.type === "payment-error") {
      const required = result.response.headers["PAYMENT-REQUIRED"];
      if (required && !seen.paymentRequired) seen.paymentRequired = required;
      write(response, result.response);
      return;
    }
    if (result.type !== "payment-verified") throw new Error(`GET /report served unpaid: ${result.type}`);
    const responseHeaders = { "Content-Type": "text/plain" };
    if (charge !== null && charge !== undefined) {
      responseHeaders[SETTLEMENT_OVERRIDES_HEADER] = JSON.stringify({ amount: charge });
    }
    const settled = await resource.processSettlement(
      result.paymentPayload,
      result.paymentRequirements,
      result.declaredExtensions,
      { request: context, responseBody: Buffer.from(REPORT), responseHeaders },
    );
    if (!settled.success) {
      write(response, settled.response);
      return;
    }
    write(response, { status: 200, headers: { "Content-Type": "text/plain", ...settled.headers }, body: REPORT });
  };
}

function listen(handle) {
  return new Promise((resolve, reject) => {
    const server = http.createServer((request, response) => {
      handle(request, response, `http://127.0.0.1:${server.address().port}`).catch((error) => {
        console.error(error);
        write(response, { status: 500, headers: {}, body: { error: String(error?.message ?? error) } });
      });
    });
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}

async function main() {
  const { facilitatorUrl, rpcUrl, privateKey, offer, declared, charge } = await readStdin();
  const facilitator = new HTTPFacilitatorClient({ url: facilitatorUrl, timeoutMs: 60000 });
  const core = new x402ResourceServer(facilitator);
  core.register(offer.network, new ExactServer());
  core.register(offer.network, new UptoServer());
  const routes = {
    "GET /report": {
      accepts: {
        scheme: offer.scheme,
        network: offer.network,
        payTo: offer.payTo,
        price: { amount: offer.amount, asset: offer.asset, extra: offer.extra },
        maxTimeoutSeconds: 120,
      },
      description: "a report",
      mimeType: "text/plain",
      ...(declared ? { extensions: declared } : {}),
    },
  };
  const resource = new x402HTTPResourceServer(core, routes);
  await resource.initialize();
  const seen = { requests: 0, signatures: [], paymentRequired: null };
  const server = await listen(handlerOf(resource, charge, seen));
  try {
    const url = `http://127.0.0.1:${server.address().port}/report`;
    const account = privateKeyToAccount(privateKey);
    // The SDK pays only tokens it knows (real USDC deployments) unless told of others.
    const allowed = { network: offer.network, asset: offer.asset, maxAmountPerPayment: offer.amount };
    const client = x402Client.fromConfig({ schemes: [], spendControls: { allowedAssets: [allowed] } });
    client.register(offer.network, new ExactClient(account, { rpcUrl }));
    client.register(offer.network, new UptoClient(account, { rpcUrl }));
    const paid = await wrapFetchWithPayment(fetch, client)(url);
    const body = await paid.text();
    const paymentResponse = paid.headers.get("PAYMENT-RESPONSE");
    const [signature] = seen.signatures;
    if (!signature) throw new Error(`the resource was never paid: ${paid.status} ${body}`);
    const replayed = await fetch(url, { headers: { "PAYMENT-SIGNATURE": signature } });
    const replayRequired = replayed.headers.get("PAYMENT-REQUIRED");
    await replayed.text();
    const out = {
      paymentRequired: decodePaymentRequiredHeader(seen.paymentRequired),
      paymentPayload: decodePaymentSignatureHeader(signature),
      status: paid.status,
      body,
      paymentResponse: paymentResponse ? decodePaymentResponseHeader(paymentResponse) : null,
      replay: {
        status: replayed.status,
        error: replayRequired ? decodePaymentRequiredHeader(replayRequired).error ?? null : null,
      },
      requests: seen.requests,
    };
    process.stdout.write(JSON.stringify(out, (_, value) => (typeof value === "bigint" ? value.toString() : value)));
  } finally {
    server.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
