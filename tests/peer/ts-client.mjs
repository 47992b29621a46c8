// Approved writes per second, through the official TypeScript SDK client over stdio, for the
// reference server (`store-server`) and the seed design (`ts-store`), alternately, in one run.
//
// The client declares form elicitation and approves every question at once (`accept` with
// `{"approve": true}`), so each write is its full round trip: `tools/call`, the server's
// `elicitation/create`, the answer, the result. After W warm-up writes it times N sequential
// `adjust_stock {"sku":"TLS-002","delta":1,"reason":"bench"}` calls (the seed's design also needs
// `"confirm": true`), then N `get_product` reads. Each run is a new server on a new SQLite file.
// A run fails (exit 1) if a write is refused, if the person was not asked exactly once per write,
// or if the stock did not rise by exactly W + N.
//
// Run it from a copy of the seed with its dependencies installed (this script imports the SDK
// from there):
//
//   dir=$(mktemp -d) && cp -r ../shared/peers/ts-store "$dir" && (cd "$dir/ts-store" && npm ci)
//   cp tests/peer/ts-client.mjs "$dir/ts-store/"
//   node "$dir/ts-store/ts-client.mjs" --rust target/release/store-server --seed "$dir/ts-store" \
//     --writes 2000 --runs 2
//
// The client is one Node process for every run, and its own code is still being optimised over
// its first few thousand writes: the server measured first would pay for that. So each run warms
// up with W writes (default 500), and the two servers take turns going first (run 1 the
// reference server, run 2 the seed, ...).
//
// Options: --writes N (default 2000), --reads M (default N), --warmup W (default 500),
// --runs R (default 2, each server R times, alternating), --dir DIR (where the databases go;
// default the system's temporary directory), --rust PATH, --seed DIR (either or both).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

const SKU = "TLS-002";
const SEED_STOCK = 3;

function options(argv) {
  const o = { writes: 2000, reads: undefined, warmup: 500, runs: 2, dir: tmpdir(), rust: null, seed: null };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    switch (flag) {
      case "--writes": o.writes = Number(value); break;
      case "--reads": o.reads = Number(value); break;
      case "--warmup": o.warmup = Number(value); break;
      case "--runs": o.runs = Number(value); break;
      case "--dir": o.dir = value; break;
      case "--rust": o.rust = value; break;
      case "--seed": o.seed = value; break;
      default: throw new Error(`unknown option ${flag}`);
    }
  }
  o.reads ??= o.writes;
  if (!o.rust && !o.seed) throw new Error("give --rust PATH, --seed DIR or both");
  return o;
}

/// The servers to drive: how to start each on `db`, and what its writes need.
function servers(o) {
  const list = [];
  if (o.rust) list.push({ name: "store-server", command: o.rust, args: (db) => ["--db", db], extra: {} });
  if (o.seed) list.push({ name: "ts-store (seed)", command: process.execPath, args: (db) => [join(o.seed, "server.mjs"), "--db", db], extra: { confirm: true } });
  return list;
}

/// The product's stock in a `get_product` result, inside the envelope or not.
function stockOf(result) {
  const s = result.structuredContent ?? JSON.parse(result.content[0].text);
  return (s.data ?? s).stock;
}

async function run(server, o) {
  const dir = mkdtempSync(join(o.dir, "ts-client-"));
  const transport = new StdioClientTransport({
    command: server.command,
    args: server.args(join(dir, "store.db")),
    env: { ...process.env, MCP_WRITES_ENABLED: "true", RUST_LOG: "info" },
    stderr: "ignore",
  });
  const client = new Client({ name: "ts-client-bench", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
  let asked = 0;
  let askedAt = 0;
  client.setRequestHandler(ElicitRequestSchema, async () => {
    asked += 1;
    askedAt = performance.now();
    return { action: "accept", content: { approve: true } };
  });
  await client.connect(transport);
  const args = { sku: SKU, delta: 1, reason: "bench", ...server.extra };
  const write = async () => {
    const result = await client.callTool({ name: "adjust_stock", arguments: args });
    if (result.isError) throw new Error(`${server.name}: write refused: ${result.content?.[0]?.text}`);
  };
  for (let i = 0; i < o.warmup; i++) await write();
  asked = 0;
  let toQuestion = 0;
  let fromAnswer = 0;
  const start = performance.now();
  for (let i = 0; i < o.writes; i++) {
    const sent = performance.now();
    await write();
    const done = performance.now();
    toQuestion += askedAt - sent;
    fromAnswer += done - askedAt;
  }
  const writeMs = performance.now() - start;
  if (asked !== o.writes) throw new Error(`${server.name}: asked ${asked} times for ${o.writes} writes`);
  const readStart = performance.now();
  let stock = 0;
  for (let i = 0; i < o.reads; i++) {
    stock = stockOf(await client.callTool({ name: "get_product", arguments: { sku: SKU } }));
  }
  const readMs = performance.now() - readStart;
  if (o.reads === 0) stock = stockOf(await client.callTool({ name: "get_product", arguments: { sku: SKU } }));
  await client.close();
  rmSync(dir, { recursive: true, force: true });
  if (stock !== SEED_STOCK + o.warmup + o.writes) {
    throw new Error(`${server.name}: stock is ${stock}, expected ${SEED_STOCK + o.warmup + o.writes}`);
  }
  return {
    writesPerSec: (o.writes * 1000) / writeMs,
    readsPerSec: o.reads ? (o.reads * 1000) / readMs : NaN,
    toQuestionUs: (toQuestion * 1000) / o.writes,
    fromAnswerUs: (fromAnswer * 1000) / o.writes,
  };
}

const o = options(process.argv.slice(2));
const list = servers(o);
const results = new Map(list.map((s) => [s.name, []]));
for (let r = 1; r <= o.runs; r++) {
  for (const server of r % 2 === 1 ? list : [...list].reverse()) {
    const f = await run(server, o);
    results.get(server.name).push(f);
    console.log(
      `run ${r} ${server.name}: ${f.writesPerSec.toFixed(1)} approved writes/s ` +
        `(call to question ${f.toQuestionUs.toFixed(0)} µs, answer to result ${f.fromAnswerUs.toFixed(0)} µs), ` +
        `${f.readsPerSec.toFixed(1)} reads/s`,
    );
  }
  if (list.length === 2) {
    const [a, b] = list.map((s) => results.get(s.name)[r - 1]);
    console.log(`run ${r} ratio store-server / seed: writes ${(a.writesPerSec / b.writesPerSec).toFixed(2)}, reads ${(a.readsPerSec / b.readsPerSec).toFixed(2)}`);
  }
}
