// Pays the reference merchant with the official JavaScript A2A SDK (@a2a-js/sdk, A2A 1.0, extension v0.3).
//
// Run by tests/interop/test_a2a_js.py and test_a2a_js_permit2.py as `node pay.mjs` with one JSON object on
// stdin:
//   {baseUrl, binding: "JSONRPC" | "HTTP+JSON", streaming, tenant, key, extension, text,
//    token?, strangerToken?, signer?: "viem" | "x402", rpcUrl?, replay?}
// With `token`, every request carries `Authorization: Bearer <token>` (the card's bearer schemes); with
// `strangerToken`, a second client of another caller then reads and cancels the paid task, and a client
// without credentials reads it: what each was answered is printed too.
// It resolves the card with the SDK, builds a client with its ClientFactory on that binding and tenant,
// sends the priced request, signs the payment, pays, fetches the task back, and prints what it saw as JSON.
// The signer: "viem" (the default) signs the offered EIP-3009 TransferWithAuthorization with viem (EIP-712
// domain name and version from the terms' `extra`); "x402" hands the terms to the x402 TypeScript SDK's
// client (@x402/core's x402Client with @x402/evm's exact and upto EVM client schemes on a viem account,
// reading the chain at `rpcUrl`), which signs `exact` by EIP-3009 or by Permit2 and `upto` (a Permit2
// witness transfer) as the terms ask. With `replay`, the client then asks again and presents the same
// signed payment for the new task, its `accepted` swapped for the new terms (it is not signed): what it was
// answered is printed as `replayed`, with the new task's state after it.
// Any SDK error or unexpected answer exits non-zero with the reason on stderr.

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";

import { Role, taskStateToJSON } from "@a2a-js/sdk";
import {
  AgentCardResolver,
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  RestTransportFactory,
  ServiceParameters,
  withA2AExtensions,
} from "@a2a-js/sdk/client";
import { privateKeyToAccount } from "viem/accounts";

const TRANSFER_WITH_AUTHORIZATION = [
  { name: "from", type: "address" },
  { name: "to", type: "address" },
  { name: "value", type: "uint256" },
  { name: "validAfter", type: "uint256" },
  { name: "validBefore", type: "uint256" },
  { name: "nonce", type: "bytes32" },
];

const input = JSON.parse(readFileSync(0, "utf8"));
// tests/fixtures/deadlines.py's HANG_S: how long a wait may take before it is a hang.
const HANG_MS = 120_000;

function fail(message) {
  throw new Error(message);
}

// The SDK's ClientFactory keeps, per binding, the *last* 1.0 interface of the card (and wraps the transport
// for that interface's tenant): on a card listing several tenants it would pick whichever comes last. A
// client that wants one tenant keeps only that tenant's interfaces.
function tenantCard(card, tenant) {
  const interfaces = card.supportedInterfaces.filter(
    (i) => (i.tenant ?? "") === tenant && i.protocolVersion === "1.0",
  );
  return { ...card, supportedInterfaces: interfaces };
}

function newMessage(text, extra = {}) {
  return {
    messageId: randomBytes(16).toString("hex"),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
    ...extra,
  };
}

function sendRequest(message) {
  return { tenant: "", message, configuration: undefined, metadata: undefined };
}

// One SendMessage: the events of the stream, or the one Task (or Message) of a blocking call, as
// StreamResponse-like {kind, value} records.
async function send(client, message, options) {
  if (input.streaming) {
    const events = [];
    for await (const event of client.sendMessageStream(sendRequest(message), options)) {
      events.push({ kind: event.payload.$case, value: event.payload.value });
    }
    return events;
  }
  const result = await client.sendMessage(sendRequest(message), options);
  return [{ kind: "status" in result ? "task" : "message", value: result }];
}

function lastStatus(events) {
  const last = events.at(-1) ?? fail("no events");
  if (last.kind !== "task" && last.kind !== "statusUpdate") fail(`the answer ends with a ${last.kind}`);
  return last.value.status;
}

// The task once out of TASK_STATE_WORKING, as GetTask shows it: a settlement still pending when the merchant
// answers leaves the task working, and the client follows it (spec §7, T9), for as long as the tests' HANG_S.
async function followedToItsEnd(client, taskId, options) {
  const deadline = Date.now() + HANG_MS;
  for (;;) {
    const task = await client.getTask({ tenant: "", id: taskId, historyLength: undefined }, options);
    if (taskStateToJSON(task.status.state) !== "TASK_STATE_WORKING") return task;
    if (Date.now() > deadline) fail(`task ${taskId} still TASK_STATE_WORKING after ${HANG_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function taskIdOf(events) {
  const first = events[0];
  return first.kind === "task" ? first.value.id : first.value.taskId;
}

async function sign(option, key) {
  const account = privateKeyToAccount(key);
  const [namespace, reference] = option.network.split(":");
  if (namespace !== "eip155") fail(`not an EVM network: ${option.network}`);
  const now = Math.floor(Date.now() / 1000);
  const authorization = {
    from: account.address,
    to: option.payTo,
    value: option.amount,
    validAfter: String(now - 60),
    validBefore: String(now + Number(option.maxTimeoutSeconds)),
    nonce: `0x${randomBytes(32).toString("hex")}`,
  };
  const signature = await account.signTypedData({
    domain: {
      name: option.extra.name,
      version: option.extra.version,
      chainId: Number(reference),
      verifyingContract: option.asset,
    },
    types: { TransferWithAuthorization: TRANSFER_WITH_AUTHORIZATION },
    primaryType: "TransferWithAuthorization",
    message: {
      ...authorization,
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
    },
  });
  return { x402Version: 2, accepted: option, payload: { authorization, signature } };
}

// The payment the x402 TypeScript SDK's client makes for the first offer of `required` (an x402
// PaymentRequired), loaded only for this signer so that the viem path needs no @x402 package.
async function sdkSign(required, key) {
  const { x402Client } = await import("@x402/core/client");
  const { ExactEvmScheme } = await import("@x402/evm/exact/client");
  const { UptoEvmScheme } = await import("@x402/evm/upto/client");
  const account = privateKeyToAccount(key);
  const [option] = required.accepts;
  // The SDK pays only tokens it knows (real USDC deployments) unless told of others.
  const allowed = { network: option.network, asset: option.asset, maxAmountPerPayment: option.amount };
  const client = x402Client.fromConfig({ schemes: [], spendControls: { allowedAssets: [allowed] } });
  client.register(option.network, new ExactEvmScheme(account, { rpcUrl: input.rpcUrl }));
  client.register(option.network, new UptoEvmScheme(account, { rpcUrl: input.rpcUrl }));
  return client.createPaymentPayload({ ...required, accepts: [option] });
}

// What was signed, without its signature: the terms and the authorization (EIP-3009 or Permit2).
function signed(payload) {
  const { signature: _, ...rest } = payload.payload;
  return { accepted: payload.accepted, payload: rest };
}

// A fetch presenting `token` as a bearer credential on every request (none: fetch as is).
function bearerFetch(token) {
  if (!token) return fetch;
  return (url, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("Authorization", `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
}

async function clientFor(card, token) {
  const options = { fetchImpl: bearerFetch(token) };
  const transports = {
    JSONRPC: new JsonRpcTransportFactory(options),
    "HTTP+JSON": new RestTransportFactory(options),
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [transports[input.binding] ?? fail(`unknown binding ${input.binding}`)],
      preferredTransports: [input.binding],
    }),
  );
  return factory.createFromAgentCard(tenantCard(card, input.tenant));
}

// What `call` was answered: "ok", or the SDK error's class name and message.
async function outcome(call) {
  try {
    await call();
    return { ok: true };
  } catch (error) {
    return { ok: false, name: error?.constructor?.name ?? "Error", message: String(error?.message ?? error) };
  }
}

async function main() {
  const card = await AgentCardResolver.default.resolve(input.baseUrl);
  const client = await clientFor(card, input.token);
  const options = { serviceParameters: ServiceParameters.create(withA2AExtensions(input.extension)) };

  const asked = await send(client, newMessage(input.text), options);
  const askedStatus = lastStatus(asked);
  const required = askedStatus.message.metadata[input.extension];
  const taskId = taskIdOf(asked);
  const payload =
    (input.signer ?? "viem") === "viem"
      ? await sign(required.required.accepts[0], input.key)
      : input.signer === "x402"
        ? await sdkSign(required.required, input.key)
        : fail(`unknown signer ${input.signer}`);
  const payment = newMessage("Here is my payment.", {
    taskId,
    metadata: { [input.extension]: { status: "payment-submitted", payload } },
    extensions: [input.extension],
  });
  const paid = await send(client, payment, options);
  const answered = lastStatus(paid);
  const fetched = await followedToItsEnd(client, taskId, options);
  // A settlement slower than the merchant's budget (a loaded machine) is answered working with the payment
  // verified; the paid turn then ends as the client followed it.
  const pending = taskStateToJSON(answered.state) === "TASK_STATE_WORKING";
  const paidStatus = pending ? fetched.status : answered;
  const others = {};
  if (input.strangerToken) {
    const stranger = await clientFor(card, input.strangerToken);
    const anonymous = await clientFor(card, undefined);
    others.strangerGet = await outcome(() => stranger.getTask({ tenant: "", id: taskId }, options));
    others.strangerCancel = await outcome(() => stranger.cancelTask({ tenant: "", id: taskId }, options));
    others.anonymousGet = await outcome(() => anonymous.getTask({ tenant: "", id: taskId }, options));
    others.anonymousSend = await outcome(() => send(anonymous, newMessage(input.text), options));
    const after = await client.getTask({ tenant: "", id: taskId, historyLength: undefined }, options);
    others.afterState = taskStateToJSON(after.status.state);
  }
  if (input.replay) {
    const again = await send(client, newMessage(input.text), options);
    const againId = taskIdOf(again);
    const terms = lastStatus(again).message.metadata[input.extension].required.accepts[0];
    const replay = newMessage("Here is my payment.", {
      taskId: againId,
      metadata: { [input.extension]: { status: "payment-submitted", payload: { ...payload, accepted: terms } } },
      extensions: [input.extension],
    });
    others.replayed = await outcome(() => send(client, replay, options));
    const left = await client.getTask({ tenant: "", id: againId, historyLength: undefined }, options);
    others.replayedState = taskStateToJSON(left.status.state);
  }

  process.stdout.write(
    JSON.stringify({
      protocolVersion: client.protocolVersion,
      taskId,
      askedState: taskStateToJSON(askedStatus.state),
      required,
      signed: signed(payload),
      paidKinds: paid.map((event) => event.kind),
      paidState: taskStateToJSON(paidStatus.state),
      completed: paidStatus.message.metadata[input.extension],
      pendingStatus: pending ? (answered.message?.metadata?.[input.extension]?.status ?? null) : null,
      paidArtifacts: pending
        ? fetched.artifacts.length
        : paid.flatMap((event) =>
            event.kind === "task" ? event.value.artifacts : event.kind === "artifactUpdate" ? [event.value.artifact] : [],
          ).length,
      fetchedState: taskStateToJSON(fetched.status.state),
      fetchedArtifacts: fetched.artifacts.length,
      fetchedExtension: fetched.status.message.metadata[input.extension],
      signatureSeen: JSON.stringify(fetched, (_, v) => (typeof v === "bigint" ? String(v) : v)).includes(
        payload.payload.signature.slice(2),
      ),
      ...others,
    }),
  );
}

await main();
