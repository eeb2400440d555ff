// Which interface the official JavaScript SDK's ClientFactory picks from the merchant's card, unnarrowed.
//
// Run by tests/interop/test_a2a_js.py with {baseUrl, binding} as JSON on stdin; prints
// {protocolVersion, tenant}: the tenant is the one the factory's TenantTransportDecorator applies ("" for none).

import { readFileSync } from "node:fs";

import { ClientFactory, ClientFactoryOptions, TenantTransportDecorator } from "@a2a-js/sdk/client";

const input = JSON.parse(readFileSync(0, "utf8"));
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [input.binding] }),
);
const client = await factory.createFromUrl(input.baseUrl);
const tenant = client.transport instanceof TenantTransportDecorator ? client.transport.defaultTenant : "";
process.stdout.write(JSON.stringify({ protocolVersion: client.protocolVersion, tenant }));
