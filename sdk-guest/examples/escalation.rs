//! Shows the policy refusing an escalation: the guest tries to widen what
//! its task allows and prints what the node said each time.

use spear_guest::{json, Chat, ErrorKind};

fn main() {
    let chat = match Chat::new() {
        Ok(chat) => chat,
        Err(error) => {
            eprintln!("cannot open a session: {error}");
            std::process::exit(1);
        }
    };
    let attempts: [(&str, spear_guest::Value); 3] = [
        ("mcp.task_tool_denylist", json!([])),
        ("mcp.server_ids", json!(["fs", "not-allowed"])),
        ("mcp.allowed_server_ids", json!(["anything"])),
    ];
    for (key, value) in attempts {
        match chat.set_param(key, &value) {
            Err(error) if error.kind() == ErrorKind::PermissionDenied => {
                println!("{key}: refused (EACCES): {error}")
            }
            Err(other) => println!("{key}: {other}"),
            Ok(()) => println!("{key}: ACCEPTED (this is a bug)"),
        }
    }
    match chat.get_param("mcp.server_ids") {
        Ok(ids) => println!("mcp.server_ids is still {ids}"),
        Err(error) => println!("cannot read mcp.server_ids: {error}"),
    }
}
