//! A ranked lexical index over tools, for tool search (docs/decisions/0006-tool-search.md):
//! entry points [`Terms::of_tool`] (a tool's words, computed once when a
//! server's catalog is listed) and [`SearchIndex::build`] (the index over
//! the tools one session may see, built from those terms).
//!
//! Okapi BM25 over weighted fields: the tool's name counts three times,
//! its title and argument names twice, its description, argument
//! descriptions and server id once. Words are split at non-alphanumerics
//! and camelCase humps, lower-cased, stripped of common English words and
//! stemmed (Snowball), so "Unzip archives" finds `extract_archive`.
//!
//! Deterministic by construction, so a repeated query gives the same list
//! in the same order and a provider's prompt cache stays warm: scores are
//! summed over the query's terms in sorted order, and ties are broken by
//! the order the tools were given in.

mod bm25;
mod terms;

pub use bm25::{Hit, SearchIndex};
pub use terms::{words, Terms};
