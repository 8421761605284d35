// Spear agents in JavaScript and TypeScript, built as WebAssembly
// components with componentize-js against the world in wit/spear-agent.wit.
//
// An agent module default-exports its `main(input, facts)`; `agent(main)`
// turns it into the world's `run` export:
//
//     import { agent, Chat } from "spear-agent";
//
//     export const run = agent((question) => {
//       const chat = new Chat();
//       chat.useServers(["fs"]);
//       chat.write("user", question);
//       return chat.send().content;
//     });
//
// Every call the node refuses throws `Refused`, with the node's sentence;
// one that escapes `main` fails the run with it (exit code 1).
// `spearlet guest build agent.js -o agent.wasm` bundles this module with
// the agent (TypeScript too) and componentizes it; docs/guest-guide.md
// walks through it and docs/guest-api.md is the reference.

import { Session } from "spear:agent/cchat@0.1.0";
import { write as writeLog } from "spear:agent/log@0.1.0";

/** A call the node refused: `kind` names the refusal as the WIT does
 * ("denied", "invalid", "budget-spent"...), `sentence` is the node's
 * reason, e.g. "permission denied: server 'x' is not in the task's
 * mcp.allowed_server_ids". */
export class Refused extends Error {
  constructor(kind, sentence) {
    super(`${kind}: ${sentence}`);
    this.name = "Refused";
    this.kind = kind;
    this.sentence = sentence;
  }
}

// componentize-js throws a refused import's `err` payload wrapped in an
// error whose `payload` is the WIT `refusal` record.
function call(method, ...args) {
  try {
    return method(...args);
  } catch (error) {
    const refusal = error && error.payload;
    if (refusal && typeof refusal.sentence === "string") {
      throw new Refused(refusal.kind, refusal.sentence);
    }
    throw error;
  }
}

/** A line in the node's log, under the run's task and invocation. */
export function log(message, level = "info") {
  writeLog(level, String(message));
}

/** A send's reply (docs/guest-api.md, "The reply"). */
export class Reply {
  constructor(raw) {
    this.raw = raw;
    this.content = raw.content || "";
    this.stopReason = raw.stop_reason || "";
    this.toolCalls = raw.tool_calls || [];
    this.trace = raw.trace || [];
  }
}

/** A session with the task's model and its allowed MCP tools. */
export class Chat {
  constructor() {
    this.session = call(() => Session.create());
    this.tools = new Map();
  }

  /** Sets a session or request param (a narrowing write only). */
  setParam(key, value) {
    call(() => this.session.setParam(key, JSON.stringify(value)));
  }

  getParam(key) {
    return JSON.parse(call(() => this.session.getParam(key)));
  }

  useServers(ids) {
    this.setParam("mcp.server_ids", ids);
  }

  allowTools(patterns) {
    this.setParam("mcp.tool_allowlist", patterns);
  }

  denyTools(patterns) {
    this.setParam("mcp.tool_denylist", patterns);
  }

  /** A `system` or `user` message. */
  write(role, text) {
    call(() => this.session.writeMsg(role, text));
  }

  /** Offers `fn` to the model as a guest tool: it is called with the
   * model's arguments (an object) and what it returns (a string, or
   * anything JSON) is what the model reads. */
  tool(name, description, parameters, fn) {
    const spec = {
      name,
      description,
      parameters: parameters || { type: "object", properties: {} },
    };
    call(() => this.session.writeFn(JSON.stringify(spec)));
    this.tools.set(name, fn);
  }

  /** Runs the model until it answers, every tool call executed: MCP calls
   * by the node, guest tools here (one request at a time, the node's
   * policy and budgets on each). */
  send() {
    if (this.tools.size === 0) {
      call(() => this.session.send("auto-loop"));
      return this.reply();
    }
    const limit = this.getParam("max_iterations");
    const trace = [];
    for (let i = 0; i < limit; i++) {
      const reply = this.sendOnce();
      trace.push(...reply.trace);
      if (reply.toolCalls.length === 0) {
        reply.trace = trace;
        return reply;
      }
      for (const toolCall of reply.toolCalls) this.runCall(toolCall, trace);
    }
    throw new Refused(
      "failed",
      `the model asked for tools ${limit} times without answering (max_iterations)`,
    );
  }

  /** One request with the tools offered; the calls the model asks for
   * are in the reply's `toolCalls`, unrun. */
  sendOnce() {
    call(() => this.session.send("one-request"));
    return this.reply();
  }

  sendWithoutTools() {
    call(() => this.session.send("no-tools"));
    return this.reply();
  }

  /** Runs one MCP call of the last reply: `{content, is_error, server, tool}`. */
  callTool(toolCall) {
    return JSON.parse(call(() => this.session.callTool(JSON.stringify(toolCall))));
  }

  /** Answers a call of the last reply with `content`. */
  answer(callId, content) {
    call(() => this.session.writeMsg("tool", JSON.stringify({ tool_call_id: callId, content })));
  }

  close() {
    this.session[Symbol.dispose]();
  }

  reply() {
    return new Reply(JSON.parse(call(() => this.session.recv())));
  }

  runCall(toolCall, trace) {
    const fn = toolCall.guest ? this.tools.get(toolCall.name) : undefined;
    if (fn === undefined) {
      const result = this.callTool(toolCall);
      trace.push({
        name: toolCall.name,
        server: result.server,
        tool: result.tool,
        guest: false,
        is_error: Boolean(result.is_error),
      });
      this.answer(toolCall.id, result.content || "");
      return;
    }
    let content;
    let failed = false;
    try {
      const value = fn(JSON.parse(toolCall.arguments || "{}"));
      content = typeof value === "string" ? value : JSON.stringify(value);
    } catch (error) {
      // The model reads why its call failed.
      content = `the tool failed: ${error && error.message ? error.message : error}`;
      failed = true;
    }
    trace.push({ name: toolCall.name, guest: true, is_error: failed });
    this.answer(toolCall.id, content);
  }
}

/** The world's `run` export from `main(input, facts)`: `facts` has
 * `taskId`, `invocationId` and `principal` (who the run is for, an object,
 * or null). A `Refused` (or any error) escaping `main` fails the run with
 * its message. */
export function agent(main) {
  return (input, facts) => {
    const principal = facts.principal === undefined ? null : facts.principal;
    const runFacts = {
      taskId: facts.taskId,
      invocationId: facts.invocationId,
      principal: principal === null ? null : JSON.parse(principal),
    };
    try {
      return String(main(input, runFacts));
    } catch (error) {
      throw error instanceof Error ? error.message : String(error);
    }
  };
}
