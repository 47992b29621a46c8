// Approved writes per second, through the official TypeScript SDK client over stdio, for the
// reference server (`store-server`) and the seed design (`ts-store`), side by side in one run.
//
// The client declares form elicitation and approves every question at once (`accept` with
// `{"approve": true}`), so each write is its full round trip: `tools/call`, the server's
// `elicitation/create`, the answer, the result. Each run starts every server on a new SQLite
// file, warms each up with W writes, then times N sequential
// `adjust_stock {"sku":"TLS-002","delta":1,"reason":"bench"}` calls per server (the seed's design
// also needs `"confirm": true`), then N `get_product` reads. A run fails (exit 1) if a write is
// refused, if the person was not asked exactly once per write, or if the stock did not rise by
// exactly W + N.
//
// Run it from a copy of the seed with its dependencies installed (this script imports the SDK
// from there):
//
//   dir=$(mktemp -d) && cp -r ../shared/peers/ts-store "$dir" && (cd "$dir/ts-store" && npm ci)
//   cp tests/peer/ts-client.mjs "$dir/ts-store/"
//   node "$dir/ts-store/ts-client.mjs" --rust target/release/store-server --seed "$dir/ts-store" \
//     --writes 2000 --runs 2
//
// Side by side means interleaved. The servers run at the same time, each idle while the other
// is timed, and the N writes (then the N reads) go in batches of B, in the order A B B A A B ...
// The machine's speed drifts over seconds (other tenants, frequency) and the one Node client
// keeps optimising its own code over its first thousands of messages: timed one server after
// the other, either would favour whichever server went second. Interleaved, both servers meet
// the same machine and the same client within a few hundred milliseconds of each other.
//
// The ceiling: `--no-work tests/peer/no-work-server.py` adds a third server that does no work (it
// answers with the reference server's bytes, see that file). Its rate over the seed's is the
// highest ratio any server could show through this client on this machine.
//
// Options: --writes N (default 2000), --reads M (default N), --warmup W (default 500),
// --batch B (default 100), --runs R (default 2), --dir DIR (where the databases go; default the
// system's temporary directory), --rust PATH (again to compare two builds), --seed DIR,
// --no-work PATH (any of them, at least one).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

const SKU = "TLS-002";
const SEED_STOCK = 3;
const SEED = "ts-store (seed)";

function options(argv) {
  const o = { writes: 2000, reads: undefined, warmup: 500, batch: 100, runs: 2, dir: tmpdir(), rust: [], seed: null, noWork: null };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    switch (flag) {
      case "--writes": o.writes = Number(value); break;
      case "--reads": o.reads = Number(value); break;
      case "--warmup": o.warmup = Number(value); break;
      case "--batch": o.batch = Number(value); break;
      case "--runs": o.runs = Number(value); break;
      case "--dir": o.dir = value; break;
      case "--rust": o.rust.push(value); break;
      case "--seed": o.seed = value; break;
      case "--no-work": o.noWork = value; break;
      default: throw new Error(`unknown option ${flag}`);
    }
  }
  o.reads ??= o.writes;
  for (const k of ["writes", "reads", "warmup", "batch", "runs"]) {
    if (!Number.isInteger(o[k]) || o[k] < 0) throw new Error(`--${k} must be a whole number`);
  }
  if (o.batch === 0) throw new Error("--batch must be at least 1");
  if (!o.rust.length && !o.seed && !o.noWork) throw new Error("give --rust PATH, --seed DIR, --no-work PATH or more");
  return o;
}

/// The servers to drive: how to start each on `db`, and what its writes need.
function servers(o) {
  const list = [];
  for (const path of o.rust) {
    const name = o.rust.length === 1 ? "store-server" : `store-server (${path})`;
    list.push({ name, command: path, args: (db) => ["--db", db], extra: {} });
  }
  if (o.seed) list.push({ name: SEED, command: process.execPath, args: (db) => [join(o.seed, "server.mjs"), "--db", db], extra: { confirm: true } });
  if (o.noWork) list.push({ name: "no work (ceiling)", command: "python3", args: (db) => [o.noWork, "--db", db], extra: {} });
  return list;
}

/// The product's stock in a `get_product` result, inside the envelope or not.
function stockOf(result) {
  const s = result.structuredContent ?? JSON.parse(result.content[0].text);
  return (s.data ?? s).stock;
}

/// Starts `server` on a new database and connects a client that approves every question.
async function start(server, o) {
  const dir = mkdtempSync(join(o.dir, "ts-client-"));
  const transport = new StdioClientTransport({
    command: server.command,
    args: server.args(join(dir, "store.db")),
    env: { ...process.env, MCP_WRITES_ENABLED: "true", RUST_LOG: "info" },
    stderr: "ignore",
  });
  const client = new Client({ name: "ts-client-bench", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
  const s = { server, dir, client, asked: 0, askedAt: 0, writes: 0, writeMs: 0, reads: 0, readMs: 0, toQuestion: 0, fromAnswer: 0 };
  client.setRequestHandler(ElicitRequestSchema, async () => {
    s.asked += 1;
    s.askedAt = performance.now();
    return { action: "accept", content: { approve: true } };
  });
  await client.connect(transport);
  s.args = { sku: SKU, delta: 1, reason: "bench", ...server.extra };
  return s;
}

/// One approved write; refused is an error.
async function write(s) {
  const result = await s.client.callTool({ name: "adjust_stock", arguments: s.args });
  if (result.isError) throw new Error(`${s.server.name}: write refused: ${result.content?.[0]?.text}`);
}

/// `count` timed writes, added to the session's totals.
async function timedWrites(s, count) {
  const asked = s.asked;
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const sent = performance.now();
    await write(s);
    const done = performance.now();
    s.toQuestion += s.askedAt - sent;
    s.fromAnswer += done - s.askedAt;
  }
  s.writeMs += performance.now() - start;
  s.writes += count;
  if (s.asked - asked !== count) throw new Error(`${s.server.name}: asked ${s.asked - asked} times for ${count} writes`);
}

/// `count` timed reads, each read for its stock as a client would, added to the session's totals.
async function timedReads(s, count) {
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    stockOf(await s.client.callTool({ name: "get_product", arguments: { sku: SKU } }));
  }
  s.readMs += performance.now() - start;
  s.reads += count;
}

/// Checks the stock, closes the client (and so the server) and removes the database.
async function finish(s, o) {
  const stock = stockOf(await s.client.callTool({ name: "get_product", arguments: { sku: SKU } }));
  await s.client.close();
  rmSync(s.dir, { recursive: true, force: true });
  if (stock !== SEED_STOCK + o.warmup + o.writes) {
    throw new Error(`${s.server.name}: stock is ${stock}, expected ${SEED_STOCK + o.warmup + o.writes}`);
  }
  return {
    writesPerSec: (s.writes * 1000) / s.writeMs,
    readsPerSec: s.reads ? (s.reads * 1000) / s.readMs : NaN,
    toQuestionUs: (s.toQuestion * 1000) / s.writes,
    fromAnswerUs: (s.fromAnswer * 1000) / s.writes,
  };
}

/// Runs `work(session, count)` for `total` in batches, the sessions taking turns A B B A A B ...
async function interleaved(sessions, total, batch, work) {
  for (let done = 0, k = 0; done < total; done += batch, k++) {
    const count = Math.min(batch, total - done);
    for (const s of k % 2 === 0 ? sessions : [...sessions].reverse()) await work(s, count);
  }
}

const o = options(process.argv.slice(2));
const list = servers(o);
const results = new Map(list.map((s) => [s.name, []]));
for (let r = 1; r <= o.runs; r++) {
  const sessions = [];
  for (const server of list) sessions.push(await start(server, o));
  await interleaved(sessions, o.warmup, o.batch, async (s, count) => { for (let i = 0; i < count; i++) await write(s); });
  await interleaved(sessions, o.writes, o.batch, timedWrites);
  await interleaved(sessions, o.reads, o.batch, timedReads);
  for (const s of sessions) {
    const f = await finish(s, o);
    results.get(s.server.name).push(f);
    console.log(
      `run ${r} ${s.server.name}: ${f.writesPerSec.toFixed(1)} approved writes/s ` +
        `(call to question ${f.toQuestionUs.toFixed(0)} µs, answer to result ${f.fromAnswerUs.toFixed(0)} µs), ` +
        `${f.readsPerSec.toFixed(1)} reads/s`,
    );
  }
  if (o.seed) {
    const seed = results.get(SEED)[r - 1];
    for (const s of list.filter((s) => s.name !== SEED)) {
      const a = results.get(s.name)[r - 1];
      console.log(`run ${r} ratio ${s.name} / seed: writes ${(a.writesPerSec / seed.writesPerSec).toFixed(2)}, reads ${(a.readsPerSec / seed.readsPerSec).toFixed(2)}`);
    }
  }
}
