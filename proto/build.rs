//! Generates the tonic/prost code for Spear's contracts, plus one hand-described
//! service: the server side of `Registry` whose `Watch` and `Follow` streams send frames that
//! SMS encoded once and shares between every stream (see `src/frame.rs`).
//!
//! The `.proto` files are parsed by `protox`, a protobuf compiler in Rust,
//! so the workspace builds with cargo alone (no `protoc` to install).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/spear/v1/registry.proto",
        "proto/spear/v1/report.proto",
        "proto/spear/v1/admin.proto",
        "proto/spear/v1/tasks.proto",
        "proto/spear/v1/credentials.proto",
        "proto/spear/v1/revocations.proto",
        "proto/spear/v1/pins.proto",
        "proto/spear/v1/approvals.proto",
        "proto/spear/v1/audit.proto",
        "proto/spear/v1/quotas.proto",
    ];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let descriptors = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .bytes(".")
        .codec_path("crate::codec::LeanCodec")
        .compile_fds(descriptors)?;

    let shared = tonic_build::manual::Service::builder()
        .name("Registry")
        .package("spear.v1")
        .method(
            tonic_build::manual::Method::builder()
                .name("list_servers")
                .route_name("ListServers")
                .input_type("crate::v1::ListServersRequest")
                .output_type("crate::v1::ListServersResponse")
                .codec_path("crate::codec::LeanCodec")
                .build(),
        )
        .method(
            tonic_build::manual::Method::builder()
                .name("watch")
                .route_name("Watch")
                .input_type("crate::v1::WatchRequest")
                .output_type("crate::frame::EncodedEvent")
                .codec_path("crate::frame::WatchCodec")
                .server_streaming()
                .build(),
        )
        .method(
            tonic_build::manual::Method::builder()
                .name("follow")
                .route_name("Follow")
                .input_type("crate::v1::FollowRequest")
                .output_type("crate::frame::EncodedEvent")
                .codec_path("crate::frame::FollowCodec")
                .client_streaming()
                .server_streaming()
                .build(),
        )
        .build();
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("shared");
    std::fs::create_dir_all(&out)?;
    tonic_build::manual::Builder::new()
        .build_client(false)
        .out_dir(&out)
        .compile(&[shared]);
    Ok(())
}
