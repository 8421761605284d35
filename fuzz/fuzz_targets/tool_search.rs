//! Tool search: whatever the tools' texts and the model's search arguments,
//! the index never panics, finds only tools it was given (so never one the
//! session may not see), at most the limit, best first, and the same list
//! every time (prompt caches stay warm).
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use spearlet::tool_index::{SearchIndex, Terms};
use spearlet::tools::search::MAX_LOADED;
use spearlet::tools::{OfferedTool, Search, ToolSet};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let arguments = lines.next().unwrap_or_default().to_string();
    let mut set = ToolSet::default();
    let mut docs = Vec::new();
    while let (Some(name), Some(description)) = (lines.next(), lines.next()) {
        let terms = Arc::new(Terms::of_fields(&[(3.0, name), (1.0, description)]));
        docs.push(Arc::clone(&terms));
        let offered = set.offered.offer("s", name);
        set.tools.push(OfferedTool {
            name: offered,
            description: description.to_string(),
            input_schema: Arc::new(Default::default()),
            server_id: "s".into(),
            tool: name.to_string(),
            terms,
            definition_bytes: 0,
        });
    }
    let index = SearchIndex::build(&docs);
    for limit in [1, 5, 10] {
        let hits = index.search(&arguments, limit);
        assert!(hits.len() <= limit);
        assert!(hits.iter().all(|h| h.doc < docs.len() && h.score.is_finite()));
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        assert_eq!(hits, index.search(&arguments, limit), "not deterministic");
    }
    let mut search = Search::begin(set.clone(), None, MAX_LOADED);
    let searched = search.run(&arguments);
    if let Some(trace) = searched.trace {
        assert!(trace.found.len() <= 10);
        for found in &trace.found {
            assert!(set.tools.iter().any(|t| t.name == found.name), "found a tool never given");
        }
    }
    assert!(search.visible().tools.iter().all(|t| set.tools.iter().any(|s| s.name == t.name)));
});
