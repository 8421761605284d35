//! What a module declares it needs at start, checked before it is
//! compiled (wasmtime's pooling allocator would refuse it in its own
//! terms): one memory, at most the largest a guest may have, and one
//! table, at most the elements a guest may have. Each refusal is a
//! sentence in the operator's units (MiB, `limits.memory_mb`).

use wasmparser::{Parser, Payload};

use super::limits::{GuestLimits, MAX_GUEST_MEMORY};

/// A WebAssembly page.
const PAGE: u64 = 64 * 1024;

/// What a module's own (not imported) memories and tables need at start.
#[derive(Debug, Default)]
struct Declared {
    memories: u32,
    memory_pages: u64,
    tables: u32,
    table_elements: u64,
}

fn declared(wasm: &[u8]) -> Option<Declared> {
    let mut found = Declared::default();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.ok()? {
            Payload::MemorySection(memories) => {
                for memory in memories {
                    found.memories += 1;
                    found.memory_pages = found.memory_pages.max(memory.ok()?.initial);
                }
            }
            Payload::TableSection(tables) => {
                for table in tables {
                    found.tables += 1;
                    found.table_elements = found.table_elements.max(table.ok()?.ty.initial);
                }
            }
            _ => {}
        }
    }
    Some(found)
}

/// A declaration past what a guest may have, said in the operator's units.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Oversized {
    #[error("the module declares {0} memories; a guest may have one")]
    Memories(u32),
    #[error("the module declares {declared_mib} MiB of memory at start; this node gives a guest at most {max_mib} MiB (the most limits.memory_mb may be)")]
    Memory { declared_mib: u64, max_mib: u64 },
    #[error("the module declares {0} tables; a guest may have one")]
    Tables(u32),
    #[error("the module declares a table of {declared} elements at start; a guest may have at most {max}")]
    Table { declared: u64, max: u64 },
}

/// Why `wasm` (a binary module) does not fit any run on this node, if so.
/// A module that does not parse passes: compiling it says why.
pub fn check(wasm: &[u8]) -> Result<(), Oversized> {
    let Some(needs) = declared(wasm) else {
        return Ok(());
    };
    if needs.memories > 1 {
        return Err(Oversized::Memories(needs.memories));
    }
    let bytes = needs.memory_pages.saturating_mul(PAGE);
    if bytes > MAX_GUEST_MEMORY as u64 {
        return Err(Oversized::Memory {
            declared_mib: bytes >> 20,
            max_mib: (MAX_GUEST_MEMORY >> 20) as u64,
        });
    }
    if needs.tables > 1 {
        return Err(Oversized::Tables(needs.tables));
    }
    let max = GuestLimits::default().table_elements as u64;
    if needs.table_elements > max {
        return Err(Oversized::Table {
            declared: needs.table_elements,
            max,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(text: &str) -> Result<(), String> {
        check(&wat::parse_str(text).unwrap()).map_err(|e| e.to_string())
    }

    #[test]
    fn declarations_past_what_a_guest_may_have_are_said_in_its_units() {
        assert_eq!(checked("(module (memory 1) (table 10 funcref))"), Ok(()));
        let huge = checked("(module (memory 65536))").unwrap_err();
        assert!(
            huge.contains("4096 MiB of memory") && huge.contains("limits.memory_mb"),
            "{huge}"
        );
        assert!(!huge.contains("0x"), "{huge}");
        let two = checked("(module (memory 1) (memory 1))").unwrap_err();
        assert!(
            two.contains("declares 2 memories; a guest may have one"),
            "{two}"
        );
        let tables = checked("(module (table 1 funcref) (table 1 funcref))").unwrap_err();
        assert!(tables.contains("declares 2 tables"), "{tables}");
        let big = checked("(module (table 100000 funcref))").unwrap_err();
        assert!(
            big.contains("100000 elements") && big.contains("at most 10000"),
            "{big}"
        );
    }
}
