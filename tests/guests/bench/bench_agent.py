"""The components benchmark's Python guest (tests/benches/components.rs):
``start`` makes one host call and returns; ``chat N`` makes N model round
trips (a session each: create, write, send without tools, recv);
``spin`` spins until the run's wall clock ends it."""

from spear_agent import Agent, Chat


class WitWorld(Agent):
    def main(self, input: str) -> str:
        what, _, n = input.partition(" ")
        if what == "start":
            return Chat().get_param("model")
        if what == "chat":
            for _ in range(int(n)):
                chat = Chat()
                chat.write("user", "hi")
                chat.send_without_tools()
                chat.close()
            return "done"
        while True:
            pass
