// What a guest tries against the node, one thing per run, chosen by the
// run's input (one component for all, so the tests compile it once), as
// tests/guests/python/hostile.py does in Python:
//
// - widen: widens its session past the task's servers and reports the
//   node's refusal, as the Refused it arrived as;
// - spin: spins forever without a host call;
// - bomb: allocates until something stops it;
// - flood: floods the node's log through the world's `log`;
// - recurse: recurses without end;
// - host-calls: makes host calls in a tight loop;
// - tool-spin: offers a guest tool that never returns, for a model that
//   calls it.

import { agent, Chat, Refused, log } from "spear-agent";

function widen() {
  const chat = new Chat();
  try {
    chat.useServers(["fs", "elsewhere"]);
  } catch (error) {
    if (error instanceof Refused) return `refused (${error.kind}): ${error.sentence}`;
    throw error;
  }
  return "the node let the session widen";
}

function spin() {
  let n = 0;
  for (;;) n++;
}

function bomb() {
  const hoard = [];
  for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
}

function flood() {
  for (let i = 0; i < 200000; i++) log(`flood line ${i} ` + "x".repeat(200));
  return "flooded";
}

function recurse(depth) {
  return recurse(depth + 1) + 1;
}

function hostCalls() {
  const chat = new Chat();
  for (;;) chat.getParam("model");
}

function toolSpin() {
  const chat = new Chat();
  chat.useServers(["fs"]);
  chat.tool("never_returns", "Thinks forever.", null, () => {
    for (;;);
  });
  chat.write("user", "call never_returns");
  return chat.send().content;
}

const attempts = {
  widen,
  spin,
  bomb,
  flood,
  recurse: () => recurse(0),
  "host-calls": hostCalls,
  "tool-spin": toolSpin,
};

export const run = agent((input) => attempts[input.trim()]());
