//! The workspace builds with cargo alone (issue 26): the `protoc` that
//! `.cargo/config.toml` gives build scripts (etcd-client's) is
//! `scripts/protoc`, protox behind protoc's arguments. Here it compiles a
//! proto with an import as prost-build calls it, into a descriptor set.

use std::process::Command;

use spear_tests::tasks::repo_file;

#[test]
fn scripts_protoc_answers_prost_builds_call_like_protoc() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.proto"),
        "syntax = \"proto3\"; package t; import \"b.proto\"; message A { B b = 1; }",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.proto"),
        "syntax = \"proto3\"; package t; import \"google/protobuf/timestamp.proto\"; message B { google.protobuf.Timestamp at = 1; }",
    )
    .unwrap();
    let out = dir.path().join("set.bin");
    let status = Command::new(repo_file("scripts/protoc"))
        .args(["--include_imports", "--include_source_info", "-o"])
        .arg(&out)
        .arg("-I")
        .arg(dir.path())
        .arg(dir.path().join("a.proto"))
        .status()
        .unwrap();
    assert!(status.success());
    let set = std::fs::read(&out).unwrap();
    // The set holds the file, its import and the well-known type.
    for name in ["a.proto", "b.proto", "google/protobuf/timestamp.proto"] {
        assert!(
            set.windows(name.len()).any(|w| w == name.as_bytes()),
            "{name} not in the descriptor set"
        );
    }
    // And a proto that does not parse is a failure, not an empty set.
    std::fs::write(
        dir.path().join("bad.proto"),
        "syntax = \"proto3\"; message {",
    )
    .unwrap();
    let status = Command::new(repo_file("scripts/protoc"))
        .arg("-o")
        .arg(dir.path().join("bad.bin"))
        .arg("-I")
        .arg(dir.path())
        .arg(dir.path().join("bad.proto"))
        .status()
        .unwrap();
    assert!(!status.success());
}
