// An agent with a tool of its own: the model may call `word_count`, which
// runs here in the guest, beside the filesystem server's tools.

import { agent, Chat } from "spear-agent";

export const run = agent((input) => {
  const chat = new Chat();
  chat.useServers(["fs"]);
  chat.tool(
    "word_count",
    "Counts the words of a text.",
    { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    ({ text }) => `${text.split(/\s+/).filter(Boolean).length} words`,
  );
  chat.write("user", input.trim() || "How many words does notes.txt have?");
  return chat.send().content;
});
