//! An incremental Server-Sent Events parser: feed bytes as they arrive, take
//! complete events out. Streamed model answers and the legacy MCP HTTP+SSE
//! transport both read their streams through it.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub name: String,
    pub data: String,
}

/// Feed bytes as they arrive; take complete events out.
#[derive(Debug, Default)]
pub struct Parser {
    buffer: Vec<u8>,
    name: String,
    data: String,
}

impl Parser {
    /// Adds `bytes` and returns every event they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() || !self.name.is_empty() {
                    events.push(Event {
                        name: std::mem::take(&mut self.name),
                        data: std::mem::take(&mut self.data),
                    });
                }
            } else if let Some(value) = line.strip_prefix("event:") {
                self.name = value.trim_start().to_string();
            } else if let Some(value) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        events
    }

    /// Bytes held for an unfinished event.
    pub fn pending(&self) -> usize {
        self.buffer.len() + self.data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut p = Parser::default();
        assert!(p.feed(b"event: a\r\ndata: {\"x\"").is_empty());
        let events = p.feed(b":1}\n\ndata: [DONE]\n\n");
        assert_eq!(
            events,
            vec![
                Event {
                    name: "a".into(),
                    data: "{\"x\":1}".into()
                },
                Event {
                    name: String::new(),
                    data: "[DONE]".into()
                },
            ]
        );
    }
}
