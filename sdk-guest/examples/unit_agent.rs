//! A guest tool next to an MCP server: the agent offers the model its own
//! `convert_units` tool (a Rust closure the node calls back during the
//! loop) together with the filesystem server's read tools, and prints the
//! model's answer and which tools ran.

use std::io::Read;

use spear_guest::{json, Chat, McpParams, Value};

/// Converts `value` between a few units; an error text for others.
fn convert(args: Value) -> Result<String, String> {
    let value = args["value"].as_f64().ok_or("value must be a number")?;
    let (from, to) = (
        args["from"].as_str().unwrap_or(""),
        args["to"].as_str().unwrap_or(""),
    );
    let out = match (from, to) {
        ("km", "mi") => value * 0.621_371,
        ("mi", "km") => value / 0.621_371,
        ("kg", "lb") => value * 2.204_62,
        ("lb", "kg") => value / 2.204_62,
        ("c", "f") => value * 9.0 / 5.0 + 32.0,
        ("f", "c") => (value - 32.0) * 5.0 / 9.0,
        _ => {
            return Err(format!(
                "cannot convert {from} to {to}; units: km, mi, kg, lb, c, f"
            ))
        }
    };
    Ok(format!("{value} {from} = {out:.3} {to}"))
}

fn main() {
    let mut question = String::new();
    let _ = std::io::stdin().read_to_string(&mut question);
    if question.trim().is_empty() {
        question = "How far is the distance in notes.txt, in miles?".into();
    }
    let result = (|| {
        let chat = Chat::new()?;
        chat.apply(
            &McpParams::new()
                .servers(&["fs"])
                .allow(&["read_*", "list_*"]),
        )?;
        chat.tool(
            "convert_units",
            "Converts a value between units: km, mi, kg, lb, c, f.",
            json!({"type": "object", "properties": {
                "value": {"type": "number"}, "from": {"type": "string"}, "to": {"type": "string"}},
                "required": ["value", "from", "to"]}),
            convert,
        )?;
        chat.write(
            "system",
            "Answer with the files you can read and the converter.",
        )?;
        chat.write("user", question.trim())?;
        chat.send()
    })();
    match result {
        Ok(reply) => {
            println!("{}", reply.content);
            eprintln!("answered by {}/{}", reply.backend, reply.model);
            for call in &reply.trace {
                let kind = if call.guest { "guest tool" } else { "mcp tool" };
                eprintln!(
                    "{kind} {}: {}",
                    call.tool.as_deref().unwrap_or(&call.name),
                    if call.is_error { "error" } else { "ok" }
                );
            }
        }
        Err(error) => {
            eprintln!("unit-agent failed: {error}");
            std::process::exit(1);
        }
    }
}
