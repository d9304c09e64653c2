#[cfg(feature = "build-server")]
fn should_build_server() -> bool {
    true
}

#[cfg(not(feature = "build-server"))]
fn should_build_server() -> bool {
    false
}

fn main() {
    let proto_root = "proto";
    println!("cargo:rerun-if-changed={proto_root}");

    // Parsed by protox (a protobuf compiler written in Rust) rather than a `protoc` binary, so
    // that a machine without protoc builds the crate.
    let descriptors = protox::compile(
        [
            "proto/etcd/api/authpb/auth.proto",
            "proto/etcd/api/etcdserverpb/rpc.proto",
            "proto/etcd/api/mvccpb/kv.proto",
            "proto/etcd/server/etcdserver/api/v3election/v3electionpb/v3election.proto",
            "proto/etcd/server/etcdserver/api/v3lock/v3lockpb/v3lock.proto",
        ],
        [proto_root],
    )
    .expect("Failed to parse proto files");
    tonic_prost_build::configure()
        .build_server(should_build_server())
        // What compile_protos adds on its own and compile_fds does not: the generated code is
        // then the same as protoc's, byte for byte.
        .type_attribute(".", "#[allow(clippy::all)]")
        .compile_fds(descriptors)
        .expect("Failed to compile proto files");
}
