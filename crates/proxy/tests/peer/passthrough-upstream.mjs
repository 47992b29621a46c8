// A small MCP server over stdio (the official TypeScript SDK's low-level `Server`) for the
// proxy's pass-through test (drive-passthrough.mjs): a prompt, argument completion, a resource,
// log levels, and one read tool, `relay`, that during its call sends progress and a log message
// and asks the client for a sampling answer and its roots, then reports what it got.
//
//   node crates/proxy/tests/peer/passthrough-upstream.mjs
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const server = new Server(
  { name: "mcp-write-guard-passthrough-upstream", version: "1.0.0" },
  { capabilities: { tools: {}, prompts: {}, resources: {}, completions: {}, logging: {} } },
);
let level = "info";

server.setRequestHandler(ListPromptsRequestSchema, async () => ({
  prompts: [{ name: "greet", description: "Greets someone.", arguments: [{ name: "who", required: true }] }],
}));
server.setRequestHandler(GetPromptRequestSchema, async (request) => ({
  messages: [{ role: "user", content: { type: "text", text: `Hello ${request.params.arguments?.who}` } }],
}));
server.setRequestHandler(CompleteRequestSchema, async (request) => {
  const prefix = request.params.argument.value;
  const values = ["alice", "alex", "bob"].filter((v) => v.startsWith(prefix));
  return { completion: { values, total: values.length, hasMore: false } };
});
server.setRequestHandler(ListResourcesRequestSchema, async () => ({
  resources: [{ uri: "note://one", name: "one", mimeType: "text/plain" }],
}));
server.setRequestHandler(ReadResourceRequestSchema, async (request) => ({
  contents: [{ uri: request.params.uri, mimeType: "text/plain", text: "the resource's text" }],
}));
server.setRequestHandler(SetLevelRequestSchema, async (request) => {
  level = request.params.level;
  return {};
});
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "relay",
      description: "Reports progress, logs, and asks the client for a sampling answer and its roots.",
      inputSchema: { type: "object", properties: {} },
      annotations: { readOnlyHint: true },
    },
  ],
}));
server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  const token = request.params._meta?.progressToken;
  if (token !== undefined) {
    for (const progress of [1, 2]) {
      await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress, total: 2 } });
    }
  }
  await server.sendLoggingMessage({ level: "warning", data: "relay log" });
  const sampled = await server.createMessage({
    messages: [{ role: "user", content: { type: "text", text: "say ok" } }],
    maxTokens: 10,
  });
  const roots = await server.listRoots();
  const report = { sampled: sampled.content.text, roots: roots.roots.map((r) => r.uri), level, progressToken: token !== undefined };
  return { content: [{ type: "text", text: JSON.stringify(report) }] };
});

await server.connect(new StdioServerTransport());
