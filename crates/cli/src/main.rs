//! `spindle`: run a drive, talk to one, benchmark one.

// The bench lab's commands, built with the default `lab` feature; a drive built without it
// (`--no-default-features`) links none of the lab's crates.
#[cfg(feature = "lab")]
mod act_cmds;
mod admin_cmds;
#[cfg(feature = "lab")]
mod archive_cmds;
#[cfg(feature = "lab")]
mod bench_cmds;
mod client_cmds;
#[cfg(feature = "lab")]
mod json_file;
#[cfg(feature = "lab")]
mod plan_cmds;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use spindle_drive::config::ConfigFile;
use spindle_drive::{DriveConfig, EngineKind};

#[derive(Parser)]
#[command(name = "spindle", version)]
#[cfg_attr(feature = "lab", command(about = "A Kinetic key-value drive, its client and its bench lab"))]
#[cfg_attr(not(feature = "lab"), command(about = "A Kinetic key-value drive and its client (built without the bench lab)"))]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a drive.
    Drive(DriveArgs),
    #[command(flatten)]
    Client(client_cmds::ClientCommand),
    /// Measure a Kinetic endpoint.
    #[cfg(feature = "lab")]
    #[command(subcommand)]
    Bench(bench_cmds::BenchCommand),
    /// Administer a drive: ACLs, PINs, lock/erase, cluster version, power (TLS for security).
    #[command(subcommand)]
    Admin(admin_cmds::AdminCommand),
    /// Design a storage tier: nodes and drives per node from a catalogue, by integer programming.
    #[cfg(feature = "lab")]
    Plan(plan_cmds::PlanArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum EngineArg {
    Fjall,
    Memory,
}

#[derive(clap::Args)]
struct DriveArgs {
    /// Data directory [default: ./spindle-data]
    #[arg(long)]
    data: Option<PathBuf>,
    /// Plain TCP port (0: any free port) [default: 8123]
    #[arg(long)]
    port: Option<u16>,
    /// TLS port, reported to clients [default: 8443]
    #[arg(long)]
    tls_port: Option<u16>,
    /// Address to listen on [default: 127.0.0.1]
    #[arg(long)]
    listen: Option<std::net::IpAddr>,
    /// TOML file with settings and limits; flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Storage engine [default: fjall]
    #[arg(long, value_enum)]
    engine: Option<EngineArg>,
    /// Nominal capacity (a quota); default: the filesystem's size.
    #[arg(long)]
    capacity_bytes: Option<u64>,
    /// Free space kept back on the filesystem before writes get NO_SPACE.
    #[arg(long)]
    reserved_bytes: Option<u64>,
    /// PEM certificate chain for the TLS listener (default: a self-signed pair kept in DATA/tls)
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for the TLS listener
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Start with factory settings (default identity, no PINs) if the stored settings are
    /// missing or damaged, instead of refusing to start; a lost identity is replaced by a new one.
    #[arg(long)]
    reset_settings: bool,
    /// Start even though a journal is damaged where it had been made durable: keep every intact
    /// batch, drop the damage and record what was dropped (in journal-salvage.log and GETLOG
    /// MESSAGES). Without it such a drive refuses to start.
    #[arg(long)]
    salvage_journal: bool,
    /// Multi-tenant drives: keys outside a caller's scopes answer as absent ones
    /// (GETNEXT/GETPREVIOUS skip them, GETKEYRANGE counts without them) instead of NOT_AUTHORIZED.
    #[arg(long)]
    hide_out_of_scope_keys: bool,
    /// For tools written against the reference simulator: merge a SECURITY message's ACL into
    /// the one in force (each entry replaces its identity's, the others stay) instead of
    /// replacing the whole list as the protocol says.
    #[arg(long)]
    merge_acls: bool,
}

fn drive_config(args: &DriveArgs) -> Result<DriveConfig, Box<dyn std::error::Error>> {
    let mut config = DriveConfig::default();
    if let Some(path) = &args.config {
        config = config.merge_file(path)?;
    }
    // Flags override the file.
    let flags = ConfigFile {
        data: args.data.clone(),
        listen: args.listen,
        port: args.port,
        tls_port: args.tls_port,
        engine: args.engine.map(|e| match e {
            EngineArg::Fjall => EngineKind::Fjall,
            EngineArg::Memory => EngineKind::Memory,
        }),
        capacity_bytes: args.capacity_bytes,
        reserved_bytes: args.reserved_bytes,
        tls_cert: args.tls_cert.clone(),
        tls_key: args.tls_key.clone(),
        reset_settings: args.reset_settings.then_some(true),
        salvage_journal: args.salvage_journal.then_some(true),
        hide_out_of_scope_keys: args.hide_out_of_scope_keys.then_some(true),
        merge_acls: args.merge_acls.then_some(true),
        ..ConfigFile::default()
    };
    Ok(config.merge(flags)?)
}

async fn run_drive(args: DriveArgs) -> Result<(), Box<dyn std::error::Error>> {
    let config = drive_config(&args)?;
    let data = config.data_dir.clone();
    let drive = spindle_drive::start(config).await?;
    // Scripts and tests wait for this exact line (and read the port from it).
    println!("spindle drive listening on {} tls {} (data in {})", drive.local_addr, drive.tls_addr, data.display());
    use std::io::Write;
    std::io::stdout().flush()?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = drive.shutdown_requested() => {}
    }
    tracing::info!("stopping: making acknowledged writes durable");
    drive.shutdown().await?;
    Ok(())
}

/// jemalloc for the drive and the load generator alike (crates/drive/src/memory.rs says why).
#[global_allocator]
static GLOBAL: spindle_drive::memory::Allocator = spindle_drive::memory::ALLOCATOR;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SPINDLE_LOG").unwrap_or_else(|_| "spindle=info,spindle_drive=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // Threads serving connections (default: one per core). The engine's writer and fjall's
    // background workers run beside them.
    if let Some(n) = std::env::var("SPINDLE_WORKER_THREADS").ok().and_then(|v| v.parse::<usize>().ok()).filter(|n| *n > 0) {
        builder.worker_threads(n);
    }
    let runtime = builder.enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Drive(args) => run_drive(args).await,
            Command::Client(cmd) => client_cmds::run(cmd).await,
            #[cfg(feature = "lab")]
            Command::Bench(cmd) => bench_cmds::bench(cmd).await,
            Command::Admin(cmd) => admin_cmds::run(cmd).await,
            #[cfg(feature = "lab")]
            Command::Plan(args) => plan_cmds::run(args),
        }
    });
    if let Err(e) = result {
        eprintln!("spindle: {e}");
        std::process::exit(1);
    }
}
