//! An agent that answers a question with the filesystem MCP server.
//! Reads the question from stdin (or uses a default) and prints the answer.

use std::io::Read;

use spear_guest::{Chat, McpParams};

fn main() {
    let mut question = String::new();
    let _ = std::io::stdin().read_to_string(&mut question);
    if question.trim().is_empty() {
        question = "What does notes.txt say?".into();
    }
    let result = (|| {
        let chat = Chat::new()?;
        // Narrow the session: only the filesystem server, only reading.
        chat.apply(
            &McpParams::new()
                .servers(&["fs"])
                .allow(&["read_*", "list_*"]),
        )?;
        chat.write("system", "Answer using the files you can read.")?;
        chat.write("user", question.trim())?;
        chat.send()
    })();
    match result {
        Ok(reply) => {
            println!("{}", reply.content);
            eprintln!("tool calls: {}", reply.trace.len());
        }
        Err(error) => {
            eprintln!("fs-agent failed: {error}");
            std::process::exit(1);
        }
    }
}
