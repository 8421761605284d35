//! The name resolver: whatever the model sends, it resolves only to a tool
//! that was offered, and never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spearlet::tools::{offered_name, OfferedTools, ToolRef};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\n');
    let probe = parts.next().unwrap_or_default().to_string();
    let mut offered = OfferedTools::default();
    let mut tools = Vec::new();
    while let (Some(server), Some(tool)) = (parts.next(), parts.next()) {
        offered.offer(server, tool);
        tools.push(ToolRef {
            server: server.to_string(),
            tool: tool.to_string(),
        });
    }
    if let Ok(found) = offered.resolve(&probe) {
        assert!(tools.contains(found), "resolved to a tool never offered");
    }
    for ToolRef { server, tool } in &tools {
        let name = offered_name(server, tool);
        assert!(!name.is_empty() && name.len() <= 64);
        assert!(name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
    }
});
