// An agent that answers a question with the filesystem MCP server, as
// sdk-guest/examples/fs_agent.rs does: the input is the question (or a
// default), the output the answer.

import { agent, Chat, log } from "spear-agent";

export const run = agent((input) => {
  const question = input.trim() || "What does notes.txt say?";
  const chat = new Chat();
  // Narrow the session: only the filesystem server, only reading.
  chat.useServers(["fs"]);
  chat.allowTools(["read_*", "list_*"]);
  chat.write("system", "Answer using the files you can read.");
  chat.write("user", question);
  const reply = chat.send();
  log(`tool calls: ${reply.trace.length}`);
  return reply.content;
});
