// The fs-agent in TypeScript: what examples/fs_agent.js does, checked
// against the SDK's types.

import { agent, Chat, log, Refused, type RunFacts } from "spear-agent";

export const run = agent((input: string, facts: RunFacts): string => {
  const question: string = input.trim() || "What does notes.txt say?";
  const chat = new Chat();
  try {
    chat.useServers(["fs"]);
    chat.allowTools(["read_*", "list_*"]);
  } catch (error) {
    if (error instanceof Refused) return `refused (${error.kind}): ${error.sentence}`;
    throw error;
  }
  chat.write("system", "Answer using the files you can read.");
  chat.write("user", question);
  const reply = chat.send();
  log(`task ${facts.taskId}: tool calls: ${reply.trace.length}`);
  return reply.content;
});
