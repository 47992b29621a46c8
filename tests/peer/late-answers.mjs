// The official TypeScript SDK client against store-server over stdio, legacy era: a person who
// answers after the client gave up still gets their change applied, once, by the retry; a client
// that resets its timeout on progress waits for the person. Run by .ci/run after `npm ci` here:
//
//   node tests/peer/late-answers.mjs --server target/debug/store-server
//
// Each case starts its own server on a new SQLite file. Prints one line per case and a closing
// "N passed, N failed" line; exits 1 if any case failed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const SKU = "TLS-002";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function serverPath(argv) {
  const i = argv.indexOf("--server");
  if (i < 0 || !argv[i + 1]) throw new Error("usage: late-answers.mjs --server PATH");
  return argv[i + 1];
}

/// A client whose person answers every question "approve" after `answerAfterMs`.
async function start(server, answerAfterMs) {
  const dir = mkdtempSync(join(tmpdir(), "late-answers-"));
  const transport = new StdioClientTransport({
    command: server,
    args: ["--db", join(dir, "store.db"), "--approval-ttl", "30", "--progress-every", "1"],
    env: { ...process.env, MCP_WRITES_ENABLED: "true" },
    stderr: "ignore",
  });
  const client = new Client(
    { name: "late-answers", version: "1.0.0" },
    { capabilities: { elicitation: {} } },
  );
  const person = { asked: 0, answered: 0 };
  client.setRequestHandler(ElicitRequestSchema, async () => {
    person.asked += 1;
    await sleep(answerAfterMs);
    person.answered += 1;
    return { action: "accept", content: { approve: true } };
  });
  await client.connect(transport);
  return { client, person, close: async () => { await client.close(); rmSync(dir, { recursive: true, force: true }); } };
}

async function stock(client) {
  const result = await client.callTool({ name: "get_product", arguments: { sku: SKU } });
  // get_product is a trusted read (no envelope); an enveloped one keeps it under `data`.
  const data = result.structuredContent?.data ?? result.structuredContent ?? {};
  if (typeof data.stock !== "number") throw new Error(`no stock in ${JSON.stringify(result)}`);
  return data.stock;
}

const adjust = { name: "adjust_stock", arguments: { sku: SKU, delta: 1, reason: "late answer" } };

const cases = {
  // timeout 3 s, the person answers at 5 s: the call times out, the retry applies once.
  async "a call that timed out is applied by its retry, once"(server) {
    const { client, person, close } = await start(server, 5000);
    try {
      const before = await stock(client);
      let timedOut = false;
      try {
        await client.callTool(adjust, undefined, { timeout: 3000 });
      } catch (error) {
        timedOut = /timed out/i.test(String(error?.message ?? error));
      }
      if (!timedOut) throw new Error("the first call did not time out");
      while (person.answered < 1) await sleep(100);
      await sleep(300);
      if ((await stock(client)) !== before) throw new Error("the timed-out call applied");
      const retry = await client.callTool(adjust);
      if (retry.isError) throw new Error(`the retry was refused: ${JSON.stringify(retry.content)}`);
      if (person.asked !== 1) throw new Error(`the person was asked ${person.asked} times`);
      const after = await stock(client);
      if (after !== before + 1) throw new Error(`stock ${before} -> ${after}`);
      const again = client.callTool(adjust, undefined, { timeout: 2000 }).catch(() => null);
      await again;
      if (person.asked !== 2) throw new Error("the same change after the apply was not asked anew");
      if ((await stock(client)) !== before + 1) throw new Error("applied twice");
    } finally {
      await close();
    }
  },
  // timeout 3 s reset on progress, the person answers at 8 s: the first call applies.
  async "a client that resets its timeout on progress waits for the person"(server) {
    const { client, person, close } = await start(server, 8000);
    try {
      const before = await stock(client);
      let progress = 0;
      const result = await client.callTool(adjust, undefined, {
        timeout: 3000,
        resetTimeoutOnProgress: true,
        onprogress: () => { progress += 1; },
      });
      if (result.isError) throw new Error(`refused: ${JSON.stringify(result.content)}`);
      if (progress < 3) throw new Error(`only ${progress} progress notifications`);
      if (person.asked !== 1) throw new Error(`the person was asked ${person.asked} times`);
      const after = await stock(client);
      if (after !== before + 1) throw new Error(`stock ${before} -> ${after}`);
    } finally {
      await close();
    }
  },
};

const server = serverPath(process.argv.slice(2));
let passed = 0;
let failed = 0;
for (const [name, run] of Object.entries(cases)) {
  try {
    await run(server);
    passed += 1;
    console.log(`ok: ${name}`);
  } catch (error) {
    failed += 1;
    console.log(`FAILED: ${name}: ${error?.stack ?? error}`);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
