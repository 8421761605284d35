//! What a module declares it needs at start, checked before it is
//! compiled (wasmtime's pooling allocator would refuse it in its own
//! terms): one memory, at most the largest a guest may have, and one
//! table, at most the elements a guest may have. Each refusal is a
//! sentence in the operator's units (MiB, `limits.memory_mb`).

use wasmparser::{Parser, Payload};

use super::runtime::{GuestLimits, MAX_GUEST_MEMORY};

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

/// Why `wasm` (a binary module) does not fit any run on this node, if so.
/// A module that does not parse passes: compiling it says why.
pub fn check(wasm: &[u8]) -> Result<(), String> {
    let Some(needs) = declared(wasm) else {
        return Ok(());
    };
    if needs.memories > 1 {
        return Err(format!(
            "the module declares {} memories; a guest may have one",
            needs.memories
        ));
    }
    let bytes = needs.memory_pages.saturating_mul(PAGE);
    if bytes > MAX_GUEST_MEMORY as u64 {
        return Err(format!(
            "the module declares {} MiB of memory at start; this node gives a guest at most {} MiB (the most limits.memory_mb may be)",
            bytes >> 20,
            MAX_GUEST_MEMORY >> 20
        ));
    }
    if needs.tables > 1 {
        return Err(format!(
            "the module declares {} tables; a guest may have one",
            needs.tables
        ));
    }
    let table_elements = GuestLimits::default().table_elements as u64;
    if needs.table_elements > table_elements {
        return Err(format!(
            "the module declares a table of {} elements at start; a guest may have at most {table_elements}",
            needs.table_elements
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(text: &str) -> Result<(), String> {
        check(&wat::parse_str(text).unwrap())
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
