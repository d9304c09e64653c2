//! `spindle bench s3`, `s3-compare` and `relay`: the S3 load generator's command line.

use clap::{Args, ValueEnum};

use crate::client_cmds::CmdResult;
use crate::json_file::write_atomically;

#[derive(Args)]
pub struct S3BenchArgs {
    /// The S3 server, http://HOST:PORT or https://HOST:PORT (path-style requests)
    #[arg(long)]
    endpoint: String,
    /// For https://: the PEM certificate (the server's, or its CA's) to trust
    #[arg(long)]
    tls_trust: Option<std::path::PathBuf>,
    #[arg(long, env = "SPINDLE_S3_ACCESS_KEY")]
    access_key: String,
    #[arg(long, env = "SPINDLE_S3_SECRET_KEY", hide_env_values = true)]
    secret_key: String,
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// Created if missing; the run writes under a fresh prefix and deletes what it wrote
    #[arg(long, default_value = "spindle-bench")]
    bucket: String,
    #[arg(long, value_enum, default_value = "put")]
    op: S3OpArg,
    /// Object size: 4096, 1MiB, 64MiB, 1.5GB (K/M/G and KiB.. are powers of 1024, KB.. of 1000)
    #[arg(long, default_value = "1MiB", value_parser = crate::act_cmds::parse_size)]
    size: u64,
    /// Workers, each with its own connection and one request in flight
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// How long the timed phase runs: 10s, 500ms, 2m
    #[arg(long, default_value = "10s", value_parser = spindle_bench::s3::parse_duration)]
    duration: f64,
    /// Objects at or above this size go up as multipart uploads in parts of this size (0: never)
    #[arg(long, default_value = "16MiB", value_parser = crate::act_cmds::parse_size)]
    multipart_size: u64,
    /// Objects in the prepared set of get and mixed (default: about 1 GiB, 2 per worker at
    /// least, 2500 at most)
    #[arg(long, default_value_t = 0)]
    objects: u64,
    /// A server process whose CPU time to report per MiB (repeat, or comma-separate, for a
    /// server of several processes: a gateway and its drive)
    #[arg(long = "server-pid", value_delimiter = ',')]
    server_pids: Vec<u32>,
    /// The server's name in reports and comparisons
    #[arg(long, default_value = "s3")]
    label: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Leave the run's objects in the bucket
    #[arg(long)]
    no_cleanup: bool,
    /// Write under this key prefix instead of a fresh one
    #[arg(long)]
    prefix: Option<String>,
    /// GET: the prepared set is under --prefix already (an earlier run's, kept with
    /// --no-cleanup); read it without uploading
    #[arg(long, requires = "prefix")]
    prepared: bool,
    /// Also write the whole result as JSON here
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum S3OpArg {
    Put,
    Get,
    Mixed,
}

impl S3BenchArgs {
    pub(crate) fn spec(self) -> (spindle_bench::s3::S3BenchSpec, Option<std::path::PathBuf>) {
        use spindle_bench::s3::{client::S3Endpoint, Mix, S3BenchSpec, S3Op};
        let spec = S3BenchSpec {
            target: S3Endpoint { endpoint: self.endpoint, region: self.region, bucket: self.bucket, access_key: self.access_key, secret_key: self.secret_key, tls_trust: self.tls_trust },
            label: self.label,
            op: match self.op {
                S3OpArg::Put => S3Op::Put,
                S3OpArg::Get => S3Op::Get,
                S3OpArg::Mixed => S3Op::Mixed,
            },
            object_bytes: self.size,
            concurrency: self.concurrency,
            duration_seconds: self.duration,
            multipart_bytes: self.multipart_size,
            objects: self.objects,
            mix: Mix::WARP,
            server_pids: self.server_pids,
            seed: self.seed,
            cleanup: !self.no_cleanup,
            prefix: self.prefix,
            prepared: self.prepared,
        };
        (spec, self.json)
    }
}

pub async fn bench_s3(a: S3BenchArgs) -> CmdResult {
    let (spec, json) = a.spec();
    let r = spindle_bench::s3::run(spec).await?;
    if let Some(path) = &json {
        write_atomically(path, &r)?;
    }
    print!("{}", spindle_bench::s3::markdown(&r));
    if r.cleanup_errors > 0 {
        eprintln!("warning: {} of the run's objects could not be deleted (prefix {})", r.cleanup_errors, r.prefix);
    }
    if r.errors > 0 {
        return Err(format!("{} operations failed", r.errors).into());
    }
    Ok(())
}

pub async fn bench_relay(listen: std::net::SocketAddr, to: std::net::SocketAddr) -> CmdResult {
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| format!("listening on {listen}: {e}"))?;
    eprintln!("relaying on {} to {to}", listener.local_addr()?);
    spindle_bench::relay::relay(listener, to).await?;
    Ok(())
}

pub fn bench_s3_compare(results: &[std::path::PathBuf], baseline: &str) -> CmdResult {
    let mut views = Vec::new();
    for p in results {
        let text = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        views.push(serde_json::from_slice::<spindle_bench::s3::S3ResultView>(&text).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    print!("{}", spindle_bench::s3::compare_markdown(&views, baseline)?);
    Ok(())
}
