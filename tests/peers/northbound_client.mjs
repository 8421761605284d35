// A TypeScript SDK client of Spear's northbound endpoint, for
// tests/tests/northbound_local.rs, as tests/peers/northbound_client.py:
// node northbound_client.mjs SDK_DIR GENERATION URL CALLS_JSON, where
// SDK_DIR holds node_modules with `@modelcontextprotocol/sdk` (1.x, when
// GENERATION is 1) or `@modelcontextprotocol/client` (2.x, GENERATION 2,
// negotiating with `server/discover`). Prints one JSON object: the
// protocol version, the tool names and, per call, its text, whether it
// was a tool error, and the protocol error if any.
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [sdkDir, generation, url, callsJson] = process.argv.slice(2);
const calls = JSON.parse(callsJson);
const load = (path) => import(pathToFileURL(join(sdkDir, "node_modules", path)).href);

async function connect() {
  if (generation === "1") {
    const { Client } = await load("@modelcontextprotocol/sdk/dist/esm/client/index.js");
    const { StreamableHTTPClientTransport } = await load(
      "@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js",
    );
    const client = new Client({ name: "spear-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport);
    return { client, version: transport.protocolVersion };
  }
  const { Client, StreamableHTTPClientTransport } = await load(
    "@modelcontextprotocol/client/dist/index.mjs",
  );
  const client = new Client(
    { name: "spear-test", version: "2.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const version = client.getNegotiatedProtocolVersion?.() ?? client.protocolVersion ?? null;
  return { client, version };
}

const { client, version } = await connect();
const listed = await client.listTools();
const out = { protocol: version, tools: listed.tools.map((t) => t.name).sort(), calls: [] };
for (const call of calls) {
  try {
    const result = await client.callTool({ name: call.tool, arguments: call.args ?? {} });
    const text = (result.content ?? []).map((c) => c.text ?? "").join("");
    out.calls.push({ tool: call.tool, text, is_error: Boolean(result.isError), error: null });
  } catch (error) {
    out.calls.push({ tool: call.tool, text: "", is_error: true, error: String(error.message ?? error) });
  }
}
await client.close();
console.log(JSON.stringify(out));
