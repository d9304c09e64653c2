//! Records when and from which source the drive was built, for GETLOG CONFIGURATION.

fn main() {
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let hash = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SPINDLE_BUILD_DATE={date}");
    println!("cargo:rustc-env=SPINDLE_SOURCE_HASH={hash}");
    println!("cargo:rerun-if-changed=build.rs");
}
