// The x402 TypeScript SDK's facilitator (@x402/core + @x402/evm, exact and upto EVM schemes) on 127.0.0.1.
//
// Written as the SDK's facilitator example does it: an x402Facilitator with the exact EVM scheme
// (EIP-3009 and Permit2 payloads) and the upto EVM scheme registered on a viem wallet client turned into a FacilitatorEvmSigner, served over plain node:http
// (POST /verify, POST /settle, GET /supported). CommonJS so that NODE_PATH can point at the packages.
// Settings: TS_FAC_RPC_URL, TS_FAC_PRIVATE_KEY, TS_FAC_NETWORK (CAIP-2), TS_FAC_PORT. Prints
// "listening <port>" once it answers.
"use strict";

const http = require("node:http");
const { x402Facilitator } = require("@x402/core/facilitator");
const { registerExactEvmScheme } = require("@x402/evm/exact/facilitator");
const { UptoEvmScheme } = require("@x402/evm/upto/facilitator");
const { toFacilitatorEvmSigner } = require("@x402/evm");
const { createWalletClient, http: viemHttp, publicActions, defineChain } = require("viem");
const { privateKeyToAccount } = require("viem/accounts");

const MAX_BODY = 1 << 20;

async function main() {
  const network = process.env.TS_FAC_NETWORK;
  const chainId = Number(network.split(":")[1]);
  const rpcUrl = process.env.TS_FAC_RPC_URL;
  const chain = defineChain({
    id: chainId,
    name: "dev",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const account = privateKeyToAccount(process.env.TS_FAC_PRIVATE_KEY);
  const client = createWalletClient({ account, chain, transport: viemHttp(rpcUrl) }).extend(publicActions);
  const signer = toFacilitatorEvmSigner({
    address: account.address,
    readContract: (args) => client.readContract({ ...args, args: args.args || [] }),
    verifyTypedData: (args) => client.verifyTypedData(args),
    writeContract: (args) => client.writeContract({ ...args, args: args.args || [] }),
    sendTransaction: (args) => client.sendTransaction(args),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
    getCode: (args) => client.getCode(args),
  }, { confirmationTimeoutMs: 20000 });
  const facilitator = new x402Facilitator();
  registerExactEvmScheme(facilitator, { signer, networks: network });
  facilitator.register(network, new UptoEvmScheme(signer));

  const server = http.createServer((request, response) => {
    const chunks = [];
    let size = 0;
    request.on("data", (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY) request.destroy();
      else chunks.push(chunk);
    });
    request.on("end", async () => {
      const reply = (status, body) => {
        response.writeHead(status, { "content-type": "application/json" });
        response.end(JSON.stringify(body, (_, value) => (typeof value === "bigint" ? value.toString() : value)));
      };
      try {
        if (request.method === "GET" && request.url === "/supported") {
          return reply(200, facilitator.getSupported());
        }
        if (request.method !== "POST" || !["/verify", "/settle"].includes(request.url)) {
          return reply(404, { error: "not found" });
        }
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        const call = request.url === "/verify" ? facilitator.verify : facilitator.settle;
        return reply(200, await call.call(facilitator, body.paymentPayload, body.paymentRequirements));
      } catch (error) {
        return reply(500, { error: String(error && error.message ? error.message : error) });
      }
    });
  });
  server.listen(Number(process.env.TS_FAC_PORT), "127.0.0.1", () => {
    console.log(`listening ${server.address().port}`);
  });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
