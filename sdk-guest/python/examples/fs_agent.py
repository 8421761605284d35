"""An agent that answers a question with the filesystem MCP server, as
sdk-guest/examples/fs_agent.rs does: the input is the question (or a
default), the output the answer."""

from spear_agent import Agent, Chat, log


class WitWorld(Agent):
    def main(self, question: str) -> str:
        question = question.strip() or "What does notes.txt say?"
        chat = Chat()
        # Narrow the session: only the filesystem server, only reading.
        chat.use_servers(["fs"])
        chat.allow_tools(["read_*", "list_*"])
        chat.write("system", "Answer using the files you can read.")
        chat.write("user", question)
        reply = chat.send()
        log(f"tool calls: {len(reply.trace)}")
        return reply.content
