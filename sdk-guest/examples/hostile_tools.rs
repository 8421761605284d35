//! A guest that misuses the chat API on purpose, one way per input word,
//! for the node's tests (tests/tests/guests.rs). Each refusal is printed as
//! `refused <errno kind>: <the node's sentence>`; a case that stops the run
//! prints nothing after the stop.
//!
//! Guest tools: `trap` (the tool panics), `spin` (it never returns),
//! `huge` (it returns 2 MiB), `reenter` (it calls back into the chat API).
//! Guest-driven calls: `not-offered`, `denied` (narrowed after the offer),
//! `made-up-id`. Params: `model`, `backend`, `iterations`.

use std::io::Read;

use spear_guest::{json, Chat, Error, McpParams, RequestParams, RequestedCall};

fn schema() -> spear_guest::Value {
    json!({"type": "object", "properties": {}})
}

fn report(result: Result<(), Error>) {
    match result {
        Ok(()) => println!("accepted"),
        Err(error) => println!("refused {:?}: {error}", error.kind()),
    }
}

/// A session with the one guest tool `body` and the filesystem server,
/// sent with the automatic loop; prints the answer.
fn with_tool(
    body: impl FnMut(spear_guest::Value) -> Result<String, String> + 'static,
) -> Result<(), Error> {
    let chat = Chat::new()?;
    chat.tool("probe", "A tool that misbehaves.", schema(), body)?;
    chat.write("user", "Call probe.")?;
    let reply = chat.send()?;
    println!("answer: {}", reply.content);
    Ok(())
}

fn main() {
    let mut mode = String::new();
    let _ = std::io::stdin().read_to_string(&mut mode);
    let result = match mode.trim() {
        "trap" => with_tool(|_| panic!("the tool broke")),
        "spin" => with_tool(|_| {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }),
        "huge" => with_tool(|_| Ok("x".repeat(2 << 20))),
        "reenter" => with_tool(|_| match Chat::new() {
            Ok(_) => Ok("a session opened inside a callback".into()),
            Err(error) => Ok(format!("inside the callback: {:?}: {error}", error.kind())),
        }),
        "not-offered" => (|| {
            let chat = Chat::new()?;
            chat.write("user", "read notes")?;
            chat.send_once()?;
            let made_up = RequestedCall {
                id: "call_x".into(),
                name: "mcp__ZnM__d3JpdGVfZmlsZQ".into(),
                arguments: "{}".into(),
                ..Default::default()
            };
            report(chat.call_tool(&made_up).map(|_| ()));
            Ok(())
        })(),
        "denied" => (|| {
            let chat = Chat::new()?;
            chat.write("user", "read notes")?;
            let reply = chat.send_once()?;
            chat.apply(&McpParams::new().deny(&["read_*"]))?;
            for call in reply.tool_calls() {
                report(chat.call_tool(call).map(|_| ()));
            }
            Ok(())
        })(),
        "made-up-id" => (|| {
            let chat = Chat::new()?;
            chat.write("user", "read notes")?;
            let reply = chat.send_once()?;
            report(chat.answer("call_never_made", "ok"));
            report(chat.send_once().map(|_| ()));
            println!("open calls: {}", reply.tool_calls().len());
            Ok(())
        })(),
        "model" => (|| {
            let chat = Chat::new()?;
            report(chat.set(&RequestParams::new().model("gpt-unlisted")));
            println!("model is still {}", chat.get_param("model")?);
            Ok(())
        })(),
        "backend" => (|| {
            let chat = Chat::new()?;
            report(chat.set(&RequestParams::new().backend("other")));
            println!("backend is still {}", chat.get_param("backend")?);
            Ok(())
        })(),
        "iterations" => (|| {
            let chat = Chat::new()?;
            report(chat.set(&RequestParams::new().max_iterations(1000)));
            println!(
                "max_iterations is still {}",
                chat.get_param("max_iterations")?
            );
            Ok(())
        })(),
        other => {
            eprintln!("unknown mode '{other}'");
            std::process::exit(2);
        }
    };
    if let Err(error) = result {
        println!("failed {:?}: {error}", error.kind());
    }
}
