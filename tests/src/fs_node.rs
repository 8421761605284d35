//! A node's MCP side in-process, for tests that drive the guest runtime
//! themselves: the real filesystem server over a temporary directory
//! holding `notes.txt`, and the router over it.

use std::path::PathBuf;
use std::sync::Arc;

use spear_proto::v1::{ServerSpec, Transport};
use spearlet::connections::Connections;
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tools::Router;

use crate::peers::npm_bin;

pub struct FsNode {
    pub router: Router,
    pub connections: Connections,
    /// The directory the server serves (canonical).
    pub root: PathBuf,
    _files: tempfile::TempDir,
}

impl FsNode {
    /// Server `fs` over a new directory whose `notes.txt` holds `notes`.
    pub fn new(notes: &str) -> FsNode {
        let files = tempfile::tempdir().unwrap();
        let root = files.path().canonicalize().unwrap();
        std::fs::write(root.join("notes.txt"), notes).unwrap();
        let spec = ServerSpec {
            id: "fs".into(),
            transport: Transport::Stdio as i32,
            command: npm_bin("mcp-server-filesystem")
                .to_string_lossy()
                .into_owned(),
            args: vec![root.to_string_lossy().into_owned()],
            enabled: true,
            ..Default::default()
        };
        let registry = RegistryHandle::new(RegistryView::from_specs([spec]));
        let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
        FsNode {
            router: Router::new(connections.clone(), registry),
            connections,
            root,
            _files: files,
        }
    }

    /// The notes file's path, as a model would name it.
    pub fn notes(&self) -> String {
        self.root.join("notes.txt").to_string_lossy().into_owned()
    }
}
