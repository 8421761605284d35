"""An agent with a tool of its own: the model may call ``word_count``,
which runs here in the guest, beside the filesystem server's tools."""

from spear_agent import Agent, Chat


class WitWorld(Agent):
    def main(self, question: str) -> str:
        chat = Chat()
        chat.use_servers(["fs"])

        @chat.tool(
            "Counts the words of a text.",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        )
        def word_count(text: str) -> str:
            return f"{len(text.split())} words"

        chat.write("user", question.strip() or "How many words does notes.txt have?")
        return chat.send().content
