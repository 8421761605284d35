//! A guest's memory and table limits, as WebAssembly means them:
//! [`GuestLimiter`] refuses a `memory.grow` or `table.grow` past the run's
//! limit, and the instruction returns -1 to the guest (its allocator can
//! then fail gracefully) instead of trapping. It remembers the refusal, so
//! a run that then ends badly (an allocator that aborts, a loop that spins
//! into its CPU budget) says why in its sentence.

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

/// What was refused: the first refusal of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Linear memory of `desired_bytes`, past `limit_bytes`
    /// (`limits.memory_mb`); a module's initial memory too.
    Memory {
        limit_bytes: usize,
        desired_bytes: usize,
    },
    /// A table past `limit_elements`.
    Table { limit_elements: usize },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Memory {
                limit_bytes,
                desired_bytes,
            } => write!(
                f,
                "it tried to grow its memory past its limit of {} MiB (limits.memory_mb), to {} MiB, and was refused",
                limit_bytes >> 20,
                desired_bytes.div_ceil(1 << 20)
            ),
            Refusal::Table { limit_elements } => write!(
                f,
                "it tried to grow a table past its limit of {limit_elements} elements, and was refused"
            ),
        }
    }
}

/// The store's limiter.
pub struct GuestLimiter {
    limits: StoreLimits,
    memory_bytes: usize,
    table_elements: usize,
    /// Bytes of every linear memory of the store: a component has one
    /// per core instance that defines one, and the run's limit is for
    /// all of them together, not for each.
    memory_total: usize,
    refused: Option<Refusal>,
}

impl GuestLimiter {
    pub fn new(memory_bytes: usize, table_elements: usize) -> Self {
        Self {
            limits: StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .table_elements(table_elements)
                .instances(1)
                .build(),
            memory_bytes,
            table_elements,
            memory_total: 0,
            refused: None,
        }
    }

    /// [`GuestLimiter::new`] for a component, which has `instances` core
    /// instances (each memory and table still within the run's limits).
    pub fn for_component(memory_bytes: usize, table_elements: usize, instances: usize) -> Self {
        Self {
            limits: StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .table_elements(table_elements)
                .instances(instances)
                .build(),
            ..Self::new(memory_bytes, table_elements)
        }
    }

    /// The run's first refused growth, if any.
    pub fn refused(&self) -> Option<Refusal> {
        self.refused
    }
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let added = desired.saturating_sub(current);
        let allowed = self.limits.memory_growing(current, desired, maximum)?
            && self.memory_total.saturating_add(added) <= self.memory_bytes;
        if allowed {
            self.memory_total += added;
        } else {
            self.refused.get_or_insert(Refusal::Memory {
                limit_bytes: self.memory_bytes,
                desired_bytes: desired,
            });
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limits.table_growing(current, desired, maximum)?;
        if !allowed {
            self.refused.get_or_insert(Refusal::Table {
                limit_elements: self.table_elements,
            });
        }
        Ok(allowed)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::ResourceLimiter;

    use super::GuestLimiter;

    #[test]
    fn the_memory_limit_holds_for_all_of_a_component_s_memories_together() {
        let mut limiter = GuestLimiter::for_component(10 << 20, 100, 4);
        assert!(limiter.memory_growing(0, 6 << 20, None).unwrap());
        // A second memory as large would pass a per-memory limit.
        assert!(!limiter.memory_growing(0, 6 << 20, None).unwrap());
        assert!(limiter.refused().is_some());
        assert!(limiter.memory_growing(0, 4 << 20, None).unwrap());
    }
}
