// Compiles the dev-chain contracts with solc-js (standard-JSON API) into a2a_x402/devchain/artifacts/*.json.
//
// Rebuild (from the repository root, after `npm ci`):
//     node a2a_x402/devchain/build.mjs           # rewrite the artifacts
//     node a2a_x402/devchain/build.mjs --check   # exit 1 if the committed artifacts are stale
//
// The standard-JSON API is used instead of the `solcjs` CLI because only it can pin evmVersion
// (solc 0.8.37 defaults to osaka). Every contract is built for shanghai, the newest EVM every supported
// node runs (ganache 7.9 stops there): no MCOPY, TSTORE/TLOAD or BLOBHASH, so no OpenZeppelin 5.7 module
// that uses them (SignatureChecker, Bytes) may be imported; tests/devchain/test_build.py scans the output.
// Compiler, OpenZeppelin and settings are all pinned, so the output is byte-for-byte reproducible.
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import solc from "solc";

const CONTRACTS = [
  "DevExactPermit2Proxy",
  "DevMulticall3",
  "DevPermit2",
  "DevPermitToken",
  "DevToken",
  "DevUSDC",
  "DevUptoPermit2Proxy",
  "GasBurningERC1271Wallet",
  "GasPriceSensitiveWallet",
  "MockERC1271Wallet",
  "SmartWallet",
  "WalletFactory",
];
// Sources the contracts above import, with no artifact of their own.
const SHARED = ["DevPermit2ProxyBase"];
const here = dirname(fileURLToPath(import.meta.url));
const nodeModules = join(here, "..", "..", "node_modules");
const settings = {
  evmVersion: "shanghai",
  optimizer: { enabled: true, runs: 200 },
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
};

// Only package imports reach the callback; the contracts themselves are passed inline.
function findImports(path) {
  const file = join(nodeModules, path);
  return existsSync(file) ? { contents: readFileSync(file, "utf8") } : { error: `not found: ${file}` };
}

function compile() {
  const sources = Object.fromEntries(
    [...CONTRACTS, ...SHARED].map((name) => [
      `contracts/${name}.sol`,
      { content: readFileSync(join(here, "contracts", `${name}.sol`), "utf8") },
    ]),
  );
  const input = { language: "Solidity", sources, settings };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
  const diagnostics = output.errors ?? [];
  for (const d of diagnostics) console.error(d.formattedMessage);
  if (diagnostics.some((d) => d.severity === "error")) process.exit(1);

  return CONTRACTS.map((name) => {
    const unit = output.contracts[`contracts/${name}.sol`][name];
    const artifact = {
      contractName: name,
      sourceName: `contracts/${name}.sol`,
      compiler: { name: "solc-js", version: solc.version() },
      settings: { evmVersion: settings.evmVersion, optimizer: settings.optimizer },
      abi: unit.abi,
      bytecode: `0x${unit.evm.bytecode.object}`,
      deployedBytecode: `0x${unit.evm.deployedBytecode.object}`,
    };
    return [join(here, "artifacts", `${name}.json`), `${JSON.stringify(artifact, null, 2)}\n`];
  });
}

const check = process.argv.includes("--check");
let stale = false;
for (const [file, text] of compile()) {
  if (!check) {
    writeFileSync(file, text);
    console.log(`wrote ${file}`);
  } else if (!existsSync(file) || readFileSync(file, "utf8") !== text) {
    console.error(`stale: ${file}`);
    stale = true;
  }
}
process.exit(stale ? 1 : 0);
