//! Compiles `proto/kinetic.proto` with protox (a protobuf compiler written in Rust), so a fresh
//! machine needs no `protoc` binary.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/kinetic.proto");
    println!("cargo:rerun-if-changed=proto/spindle_state.proto");
    let descriptors = protox::compile(["proto/kinetic.proto", "proto/spindle_state.proto"], ["proto"])?;
    prost_build::Config::new()
        .bytes(["."])
        // A Command is moved whole through decoding, dispatch and the response path; the
        // rarely used administrative bodies live behind a pointer so that moving one is a
        // few hundred bytes instead of 1.4 KB.
        .boxed(".kinetic.Command.Body.setup")
        .boxed(".kinetic.Command.Body.p2pOperation")
        .boxed(".kinetic.Command.Body.getLog")
        .boxed(".kinetic.Command.Body.security")
        .compile_fds(descriptors)?;
    Ok(())
}
