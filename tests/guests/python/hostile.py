"""What a guest tries against the node, one thing per run, chosen by the
run's input (one component for all, so the tests compile it once):

- ``widen``: widens its session past the task's servers and reports the
  node's refusal, as the Python exception it arrived as;
- ``spin``: spins forever without a host call;
- ``bomb``: allocates until something stops it;
- ``flood``: floods the node's log through the world's ``log``;
- ``recurse``: recurses without end;
- ``host-calls``: makes host calls in a tight loop;
- ``tool-spin``: offers a guest tool that never returns, for a model that
  calls it.
"""

from spear_agent import Agent, Chat, Refused, log


def widen() -> str:
    chat = Chat()
    try:
        chat.use_servers(["fs", "elsewhere"])
    except Refused as refused:
        return f"refused ({refused.kind}): {refused.sentence}"
    return "the node let the session widen"


def spin() -> str:
    n = 0
    while True:
        n += 1


def bomb() -> str:
    hoard = []
    while True:
        hoard.append(bytearray(1 << 20))


def flood() -> str:
    for i in range(200_000):
        log(f"flood line {i} " + "x" * 200)
    return "flooded"


def recurse(depth: int = 0) -> str:
    return recurse(depth + 1)


def host_calls() -> str:
    chat = Chat()
    while True:
        chat.get_param("model")


def tool_spin() -> str:
    chat = Chat()
    chat.use_servers(["fs"])

    @chat.tool("Thinks forever.")
    def never_returns() -> str:
        while True:
            pass

    chat.write("user", "call never_returns")
    return chat.send().content


class WitWorld(Agent):
    def main(self, input: str) -> str:
        attempts = {"widen": widen, "spin": spin, "bomb": bomb, "flood": flood,
                    "recurse": recurse, "host-calls": host_calls, "tool-spin": tool_spin}
        return attempts[input.strip()]()
