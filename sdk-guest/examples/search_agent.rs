//! Tool search with guest-driven calls: the agent turns `mcp.tool_search`
//! on and denies every tool that deletes, sends without the automatic
//! loop, and runs each call the model asks for itself, searches included.
//! It prints what each search found, each call it ran or the node
//! refused, and the model's answer.

use std::io::Read;

use spear_guest::params::SEARCH_TOOL;
use spear_guest::{Chat, Error, McpParams, RequestedCall, ToolSearch, Value};

/// "server/tool" of each tool a search's result lists.
fn found(content: &str) -> Vec<String> {
    let result: Value = serde_json::from_str(content).unwrap_or_default();
    let tools = result["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .map(|t| {
            format!(
                "{}/{}",
                t["server"].as_str().unwrap_or("?"),
                t["tool"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

fn run_call(chat: &Chat, call: &RequestedCall) -> Result<(), Error> {
    match chat.call_tool(call) {
        Ok(result) if call.name == SEARCH_TOOL => {
            println!(
                "searched {}: found {}",
                call.arguments,
                found(&result.content).join(", ")
            );
            chat.answer(&call.id, &result.content)
        }
        Ok(result) => {
            let tool = call.tool.as_deref().unwrap_or(&call.name);
            println!("ran {}/{tool}", call.server.as_deref().unwrap_or("?"));
            chat.answer(&call.id, &result.content)
        }
        Err(error) => {
            println!("refused {}: {error}", call.name);
            chat.answer(&call.id, &format!("refused: {error}"))
        }
    }
}

fn run(input: &str) -> Result<String, Error> {
    let chat = Chat::new()?;
    chat.apply(
        &McpParams::new()
            .tool_search(ToolSearch::On)
            .deny(&["delete_*"]),
    )?;
    chat.write("user", input)?;
    for _ in 0..6 {
        let reply = chat.send_once()?;
        if reply.tool_calls().is_empty() {
            return Ok(reply.content);
        }
        for call in reply.tool_calls() {
            run_call(&chat, call)?;
        }
    }
    Ok("stopped after 6 rounds".into())
}

fn main() {
    let mut input = String::new();
    let _ = std::io::stdin().read_to_string(&mut input);
    match run(input.trim()) {
        Ok(answer) => println!("{answer}"),
        Err(error) => {
            eprintln!("search-agent failed: {error}");
            std::process::exit(1);
        }
    }
}
