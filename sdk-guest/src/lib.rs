//! The guest SDK for Spear WASM agents. The cchat host API lands with the
//! guest runtime; this crate is reserved for it so the workspace layout is
//! stable from the start.
