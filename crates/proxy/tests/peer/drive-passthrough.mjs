// The official TypeScript SDK client drives mcp-write-guard-proxy in front of
// passthrough-upstream.mjs: prompts, completion, resources, log levels and log messages,
// progress, and the upstream's own sampling and roots requests all pass through, both ways.
// Run after `npm ci --prefix crates/proxy/tests/peer`:
//
//   node crates/proxy/tests/peer/drive-passthrough.mjs --proxy target/debug/mcp-write-guard-proxy
//
// Prints "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed"; exits 1 if any
// check failed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Tally, expect } from "./harness.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const i = process.argv.indexOf("--proxy");
const proxy = i < 0 ? null : process.argv[i + 1];
if (!proxy) {
  console.error("usage: node drive-passthrough.mjs --proxy PATH");
  process.exit(2);
}

const transport = new StdioClientTransport({
  command: proxy,
  args: ["--", process.execPath, join(HERE, "passthrough-upstream.mjs")],
  env: { ...process.env, MCP_WRITES_ENABLED: "true" },
  stderr: "ignore",
});
const client = new Client(
  { name: "drive-passthrough", version: "1.0.0" },
  { capabilities: { sampling: {}, roots: { listChanged: true }, elicitation: {} } },
);
const logs = [];
client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  role: "assistant",
  content: { type: "text", text: "sampled-ok" },
  model: "drive-passthrough",
}));
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: "file:///tmp/root-a", name: "a" }] }));
client.setNotificationHandler(LoggingMessageNotificationSchema, async (n) => logs.push(n.params.data));
await client.connect(transport);

const tally = new Tally();
const check = (name, body) => tally.check(name, body, { explain: (error) => error.message });

await check("prompts", async () => {
  const { prompts } = await client.listPrompts();
  expect(prompts.some((p) => p.name === "greet"), `prompts/list: ${JSON.stringify(prompts)}`);
  const prompt = await client.getPrompt({ name: "greet", arguments: { who: "bob" } });
  expect(prompt.messages[0]?.content?.text === "Hello bob", `prompts/get: ${JSON.stringify(prompt)}`);
});
await check("completion", async () => {
  const { completion } = await client.complete({
    ref: { type: "ref/prompt", name: "greet" },
    argument: { name: "who", value: "al" },
  });
  expect(JSON.stringify(completion.values) === '["alice","alex"]', `completion/complete: ${JSON.stringify(completion)}`);
});
await check("resources", async () => {
  const { resources } = await client.listResources();
  expect(resources.some((r) => r.uri === "note://one"), `resources/list: ${JSON.stringify(resources)}`);
  const read = await client.readResource({ uri: "note://one" });
  expect(read.contents[0]?.text === "the resource's text", `resources/read: ${JSON.stringify(read)}`);
});
await check("log level, progress, log message, sampling and roots", async () => {
  await client.setLoggingLevel("debug");
  let progress = 0;
  await client.listTools();
  const result = await client.callTool({ name: "relay", arguments: {} }, CallToolResultSchema, {
    onprogress: () => {
      progress += 1;
    },
  });
  expect(!result.isError, `relay failed: ${JSON.stringify(result)}`);
  const text = result.content[0]?.text ?? "";
  expect(text.startsWith("SECURITY NOTICE: "), `relay's result is not wrapped: ${text}`);
  const data = JSON.parse(text.slice("SECURITY NOTICE: ".length)).data;
  const report = JSON.parse(typeof data === "string" ? data : (data[0]?.text ?? data.text ?? JSON.stringify(data)));
  expect(report.sampled === "sampled-ok", `the upstream's sampling answer: ${JSON.stringify(report)}`);
  expect(JSON.stringify(report.roots) === '["file:///tmp/root-a"]', `the client's roots: ${JSON.stringify(report)}`);
  expect(report.level === "debug", `logging/setLevel did not reach the upstream: ${JSON.stringify(report)}`);
  expect(report.progressToken, "the call's progress token did not reach the upstream");
  expect(progress === 2, `the client got ${progress} progress notifications, not 2`);
  expect(logs.includes("relay log"), `the upstream's log message did not arrive: ${JSON.stringify(logs)}`);
});

await client.close();
tally.finish();
