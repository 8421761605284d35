// Types of spear-agent.js, so an agent written in TypeScript is checked
// against the SDK (`spearlet guest build agent.ts` strips them).

/** Names of the WIT world's `refusal-kind`. */
export type RefusalKind =
  | "invalid"
  | "denied"
  | "not-found"
  | "exists"
  | "too-many"
  | "out-of-memory"
  | "budget-spent"
  | "quota-spent"
  | "timed-out"
  | "bad-answer"
  | "failed"
  | "busy";

/** A call the node refused, with the node's sentence. */
export class Refused extends Error {
  readonly kind: RefusalKind;
  readonly sentence: string;
  constructor(kind: RefusalKind, sentence: string);
}

export type LogLevel = "debug" | "info" | "warn" | "error";

/** A line in the node's log, under the run's task and invocation. */
export function log(message: string, level?: LogLevel): void;

/** A tool call the model asked for (docs/guest-api.md, "The reply"). */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
  guest?: boolean;
}

/** One executed call of a send. */
export interface TraceEntry {
  name: string;
  server?: string;
  tool?: string;
  guest?: boolean;
  is_error?: boolean;
  [field: string]: unknown;
}

export class Reply {
  readonly raw: Record<string, unknown>;
  readonly content: string;
  readonly stopReason: string;
  readonly toolCalls: ToolCall[];
  trace: TraceEntry[];
}

/** What an MCP call returned. */
export interface ToolResult {
  content: string;
  is_error: boolean;
  server: string;
  tool: string;
}

/** A JSON Schema for a guest tool's arguments. */
export type JsonSchema = Record<string, unknown>;

/** A session with the task's model and its allowed MCP tools. */
export class Chat {
  constructor();
  setParam(key: string, value: unknown): void;
  getParam(key: string): unknown;
  useServers(ids: string[]): void;
  allowTools(patterns: string[]): void;
  denyTools(patterns: string[]): void;
  write(role: "system" | "user", text: string): void;
  tool(
    name: string,
    description: string,
    parameters: JsonSchema | null,
    fn: (args: any) => unknown,
  ): void;
  send(): Reply;
  sendOnce(): Reply;
  sendWithoutTools(): Reply;
  callTool(call: ToolCall): ToolResult;
  answer(callId: string, content: string): void;
  close(): void;
}

/** Who the run is for, as SMS verified it. */
export interface Principal {
  kind: string;
  issuer?: string;
  subject: string;
  groups?: string[];
}

export interface RunFacts {
  taskId: string;
  invocationId: string;
  principal: Principal | null;
}

/** The world's `run` export from `main`. */
export function agent(
  main: (input: string, facts: RunFacts) => string,
): (input: string, facts: unknown) => string;
