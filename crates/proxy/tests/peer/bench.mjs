// What the proxy costs a user, through the official TypeScript SDK client over stdio, in front of
// @modelcontextprotocol/server-filesystem (BENCHMARKS.md, "The proxy"). Not a test: it prints
// figures. Run after `npm ci --prefix crates/proxy/tests/peer` and a release build:
//
//   node crates/proxy/tests/peer/bench.mjs --proxy target/release/mcp-write-guard-proxy \
//       [--reads 2000] [--writes 500] [--runs 2] [--dir /tmp]
//
// Each run, side by side in turn, on a fresh directory under --dir:
//   reads direct   read_text_file of one small file, straight to the server;
//   reads proxied  the same through the proxy (an untrusted read: wrapped in the envelope);
//   writes direct  write_file of a small file, straight to the server (nobody asked);
//   writes proxied the same through the proxy, each asked and approved at once by the client.
// Prints calls/s for each and the ratios proxied/direct.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const filesystem = join(here, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const value = process.argv[i + 1];
  if (value === undefined) throw new Error(`--${name} needs a value`);
  return value;
}

const proxy = option("proxy");
if (!proxy) throw new Error("usage: bench.mjs --proxy PATH [--reads N] [--writes N] [--runs N] [--dir D]");
const reads = Number(option("reads", "2000"));
const writes = Number(option("writes", "500"));
const runs = Number(option("runs", "2"));
const base = option("dir", "/tmp");

async function open(files, proxied) {
  const upstream = [process.execPath, filesystem, files];
  const transport = new StdioClientTransport({
    command: proxied ? proxy : upstream[0],
    args: proxied ? ["--", ...upstream] : upstream.slice(1),
    env: { ...process.env, MCP_WRITES_ENABLED: "true" },
    stderr: "ignore",
  });
  const client = new Client({ name: "proxy-bench", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "accept", content: { approve: true } }));
  await client.connect(transport);
  await client.listTools();
  return client;
}

async function timed(files, proxied, n, call) {
  const client = await open(files, proxied);
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const result = await client.callTool(call(i));
    if (result.isError) throw new Error(`call ${i} failed: ${JSON.stringify(result.content)}`);
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  await client.close();
  return n / seconds;
}

for (let run = 1; run <= runs; run++) {
  const dir = mkdtempSync(join(base, "proxy-bench-"));
  const files = join(dir, "files");
  mkdirSync(files);
  const small = join(files, "small.txt");
  writeFileSync(small, "a small file\n");
  const read = () => ({ name: "read_text_file", arguments: { path: small } });
  const write = (i) => ({ name: "write_file", arguments: { path: join(files, `w${i % 50}.txt`), content: `line ${i}\n` } });
  const rd = await timed(files, false, reads, read);
  const rp = await timed(files, true, reads, read);
  const wd = await timed(files, false, writes, write);
  const wp = await timed(files, true, writes, write);
  const f = (x) => x.toFixed(0).padStart(6);
  console.log(
    `run ${run}: reads/s direct ${f(rd)} proxied ${f(rp)} (x${(rp / rd).toFixed(2)}); ` +
      `writes/s direct ${f(wd)} proxied+approved ${f(wp)} (x${(wp / wd).toFixed(2)})`,
  );
  rmSync(dir, { recursive: true, force: true });
}
