//! Approvals with guest-driven tool calls: the agent sends without the
//! automatic loop, runs the read tools the model asks for itself, and
//! refuses every other tool unless its input says "approve". Each decision
//! is printed; the model sees a refusal as the tool's result.

use std::io::Read;

use spear_guest::{Chat, Error, McpParams, RequestedCall};

/// Tools that only look: run without asking.
fn reads_only(call: &RequestedCall) -> bool {
    let tool = call.tool.as_deref().unwrap_or(&call.name);
    ["read_", "list_", "get_", "search_", "directory_tree"]
        .iter()
        .any(|prefix| tool.starts_with(prefix))
}

fn run(input: &str) -> Result<String, Error> {
    let approved = input.to_lowercase().contains("approve");
    let chat = Chat::new()?;
    chat.apply(&McpParams::new().servers(&["fs-rw"]))?;
    chat.write("system", "You manage files. Use the tools.")?;
    chat.write("user", input)?;
    for _ in 0..8 {
        let reply = chat.send_once()?;
        if reply.tool_calls().is_empty() {
            return Ok(reply.content);
        }
        for call in reply.tool_calls() {
            let tool = call.tool.as_deref().unwrap_or(&call.name);
            if reads_only(call) || approved {
                let result = chat.call_tool(call)?;
                println!(
                    "ran {tool}{}",
                    if result.is_error { " (it failed)" } else { "" }
                );
                chat.answer(&call.id, &result.content)?;
            } else {
                println!("refused {tool}: not approved");
                chat.answer(
                    &call.id,
                    &format!("refused: {tool} changes files and the user did not approve it"),
                )?;
            }
        }
    }
    Ok("stopped after 8 rounds".into())
}

fn main() {
    let mut input = String::new();
    let _ = std::io::stdin().read_to_string(&mut input);
    match run(input.trim()) {
        Ok(answer) => println!("{answer}"),
        Err(error) => {
            eprintln!("approval-agent failed: {error}");
            std::process::exit(1);
        }
    }
}
