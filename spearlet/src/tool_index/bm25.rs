//! Okapi BM25 over [`Terms`], with the usual constants.

use std::collections::HashMap;
use std::sync::Arc;

use super::terms::{words, Terms};

/// Term-frequency saturation.
const K1: f64 = 1.2;
/// How much a long document is penalised.
const B: f64 = 0.75;
/// Query words read at most.
const MAX_QUERY_WORDS: usize = 32;

/// One result: the position of the tool in the list the index was built
/// from, and its score (higher is better).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: usize,
    pub score: f64,
}

/// The index over one list of tools.
#[derive(Debug, Default)]
pub struct SearchIndex {
    /// For each word, the tools that have it and its weighted count there.
    postings: HashMap<String, Vec<(usize, f64)>>,
    lengths: Vec<f64>,
    average: f64,
    /// The terms it was built from, to tell whether it is still current.
    built_from: Vec<Arc<Terms>>,
}

impl SearchIndex {
    /// The index over `docs`, in that order.
    pub fn build(docs: &[Arc<Terms>]) -> SearchIndex {
        let mut postings: HashMap<String, Vec<(usize, f64)>> = HashMap::new();
        for (doc, terms) in docs.iter().enumerate() {
            for (word, count) in &terms.counts {
                postings
                    .entry(word.clone())
                    .or_default()
                    .push((doc, *count));
            }
        }
        let lengths: Vec<f64> = docs.iter().map(|t| t.length).collect();
        let average = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<f64>() / lengths.len() as f64
        };
        SearchIndex {
            postings,
            lengths,
            average,
            built_from: docs.to_vec(),
        }
    }

    /// True when this index was built from exactly `docs` (the same terms,
    /// in the same order): it can be used again as it is.
    pub fn built_from(&self, docs: &[Arc<Terms>]) -> bool {
        self.built_from.len() == docs.len()
            && self
                .built_from
                .iter()
                .zip(docs)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// How many tools it holds.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The best `limit` tools for `query`, best first; tools that share no
    /// word with it are not returned.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        let mut query = words(query);
        query.truncate(MAX_QUERY_WORDS);
        query.sort();
        query.dedup();
        let n = self.lengths.len() as f64;
        let mut scores = vec![0.0f64; self.lengths.len()];
        let mut matched = vec![false; self.lengths.len()];
        for word in &query {
            let Some(posting) = self.postings.get(word) else {
                continue;
            };
            let df = posting.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, tf) in posting {
                let norm = K1 * (1.0 - B + B * self.lengths[doc] / self.average.max(f64::EPSILON));
                scores[doc] += idf * tf * (K1 + 1.0) / (tf + norm);
                matched[doc] = true;
            }
        }
        let mut hits: Vec<Hit> = scores
            .into_iter()
            .enumerate()
            .filter(|(doc, _)| matched[*doc])
            .map(|(doc, score)| Hit { doc, score })
            .collect();
        // Best first; equal scores in the order the tools were given.
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
        hits.truncate(limit);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(tools: &[(&str, &str)]) -> SearchIndex {
        let docs: Vec<Arc<Terms>> = tools
            .iter()
            .map(|(name, description)| {
                Arc::new(Terms::of_fields(&[(3.0, name), (1.0, description)]))
            })
            .collect();
        SearchIndex::build(&docs)
    }

    #[test]
    fn ranks_by_rare_words_and_is_deterministic() {
        let index = index(&[
            ("read_file", "Read a file from disk."),
            ("write_file", "Write a file to disk."),
            ("extract_archive", "Unpack a zip archive into a folder."),
            ("git_log", "Show the commit history."),
        ]);
        let hits = index.search("unpack the zip", 5);
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), [2]);
        let first = index.search("file", 5);
        // Equal scores: in the order given, every time.
        assert_eq!(first.iter().map(|h| h.doc).collect::<Vec<_>>(), [0, 1]);
        for _ in 0..20 {
            assert_eq!(index.search("file", 5), first);
        }
        assert!(index.search("", 5).is_empty());
        assert!(index.search("kubernetes", 5).is_empty());
        assert_eq!(index.search("file disk", 1).len(), 1);
    }

    #[test]
    fn an_empty_index_finds_nothing() {
        let index = SearchIndex::build(&[]);
        assert!(index.search("anything", 5).is_empty());
        assert!(index.built_from(&[]));
    }
}
