//! Compiles `proto/kinetic.proto` with protox (a protobuf compiler written in Rust), so a fresh
//! machine needs no `protoc` binary.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/kinetic.proto");
    println!("cargo:rerun-if-changed=proto/spindle_state.proto");
    let descriptors = protox::compile(["proto/kinetic.proto", "proto/spindle_state.proto"], ["proto"])?;
    prost_build::Config::new()
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
