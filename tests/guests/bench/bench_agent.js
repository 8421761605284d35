// The components benchmark's JavaScript guest (tests/benches/components.rs),
// as bench_agent.py: "start", "chat N" or "spin".

import { agent, Chat } from "spear-agent";

export const run = agent((input) => {
  const [what, n] = input.split(" ");
  if (what === "start") return String(new Chat().getParam("model"));
  if (what === "chat") {
    for (let i = 0; i < Number(n); i++) {
      const chat = new Chat();
      chat.write("user", "hi");
      chat.sendWithoutTools();
      chat.close();
    }
    return "done";
  }
  for (;;);
});
