// Builds a JavaScript or TypeScript agent into a component of the world
// in wit/spear-agent.wit: esbuild bundles the agent with this SDK (and
// strips TypeScript's types), then componentize-js's `componentize()` API
// embeds the bundle in its JavaScript engine. `spearlet guest build` runs
// it with the toolchain scripts/setup.sh installs.
//
//   node build.mjs AGENT.{js,ts} OUT.wasm WIT_DIR [NODE_MODULES]
//
// NODE_MODULES (default: $HOME/.cache/spear/npm-guest/node_modules) holds
// esbuild, typescript and @bytecodealliance/componentize-js. A `.ts` agent
// is type-checked against spear-agent.d.ts first: a mistake is reported
// with its line, and nothing is built.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir, homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [source, out, wit, modulesArg] = process.argv.slice(2);
if (!source || !out || !wit) {
  console.error("usage: node build.mjs AGENT.{js,ts} OUT.wasm WIT_DIR [NODE_MODULES]");
  process.exit(2);
}
const modules = resolve(modulesArg || join(homedir(), ".cache/spear/npm-guest/node_modules"));
const load = (name, entry) => import(pathToFileURL(join(modules, name, entry)).href);
const esbuild = await load("esbuild", "lib/main.js");
const { componentize } = await load("@bytecodealliance/componentize-js", "src/componentize.js");

const sdk = dirname(fileURLToPath(import.meta.url));
if (source.endsWith(".ts")) {
  const { default: ts } = await load("typescript", "lib/typescript.js");
  const program = ts.createProgram([resolve(source)], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ES2022,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    paths: { "spear-agent": [join(sdk, "spear-agent.d.ts")] },
  });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (diagnostics.length > 0) {
    const host = {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => process.cwd(),
      getNewLine: () => "\n",
    };
    console.error(ts.formatDiagnostics(diagnostics, host).trimEnd());
    process.exit(1);
  }
}

const work = mkdtempSync(join(tmpdir(), "spear-js-"));
try {
  const bundle = join(work, "agent.js");
  await esbuild.build({
    entryPoints: [resolve(source)],
    bundle: true,
    outfile: bundle,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    alias: { "spear-agent": join(sdk, "spear-agent.js") },
    // The world's interfaces are the component's imports, not modules.
    external: ["spear:*", "wasi:*"],
    logLevel: "error",
  });
  const { component } = await componentize({
    sourcePath: bundle,
    witPath: resolve(wit),
    worldName: "agent",
    // An agent reaches the network only through the node's MCP tools.
    disableFeatures: ["http", "fetch-event"],
  });
  writeFileSync(out, component);
} finally {
  rmSync(work, { recursive: true, force: true });
}
