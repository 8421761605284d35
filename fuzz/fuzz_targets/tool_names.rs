//! The name resolver: whatever the model sends, it resolves only to a tool
//! that was offered, and never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spearlet::tools::{offered_name, OfferedTools};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\n');
    let probe = parts.next().unwrap_or_default().to_string();
    let mut offered = OfferedTools::default();
    let mut pairs = Vec::new();
    while let (Some(server), Some(tool)) = (parts.next(), parts.next()) {
        offered.offer(server, tool);
        pairs.push((server.to_string(), tool.to_string()));
    }
    if let Ok((server, tool)) = offered.resolve(&probe) {
        assert!(
            pairs.iter().any(|(s, t)| s == server && t == tool),
            "resolved to a tool never offered"
        );
    }
    for (server, tool) in &pairs {
        let name = offered_name(server, tool);
        assert!(!name.is_empty() && name.len() <= 64);
        assert!(name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
    }
});
