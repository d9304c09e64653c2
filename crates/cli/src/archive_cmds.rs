//! `spindle bench archive`: fit a file-size model (`fit`) and run the archival workloads
//! against one or more drives (`run`).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use spindle_bench::archive::envelope::{Envelope, REPLICATES_DEFAULT};
use spindle_bench::archive::fit::{parse_histogram, parse_sizes, SizeData};
use spindle_bench::archive::model::Family;
use spindle_bench::archive::workload::WriteMode;
use spindle_bench::archive::{self, ArchiveSpec, ILLUSTRATIVE_HISTOGRAM};

type CmdResult = Result<(), Box<dyn std::error::Error>>;

const MIB: u64 = 1 << 20;

#[derive(Subcommand)]
pub enum ArchiveCommand {
    /// Fit Gamma and generalized Gamma laws to file sizes and print both fits (log-likelihood,
    /// AIC) and the bootstrap envelope.
    Fit {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        json: bool,
    },
    /// Fill the drives to each utilisation level with files of each envelope and measure
    /// sequential writes (migration) and random reads of whole files and fragments.
    Run(Box<RunArgs>),
    /// Merge `run` result files (e.g. one per envelope, each on fresh drives; repeats of a
    /// row become the run with the median MB/s): a Markdown table and, with --plots, the SVGs.
    Plot {
        results: Vec<PathBuf>,
        #[arg(long)]
        plots: Option<PathBuf>,
    },
}

#[derive(Args)]
pub struct ModelArgs {
    /// File sizes, one per line (bytes)
    #[arg(long, conflicts_with = "histogram")]
    sizes: Option<PathBuf>,
    /// Log2 histogram: `LOWER UPPER COUNT` per line (default: the shipped illustrative model)
    #[arg(long)]
    histogram: Option<PathBuf>,
    /// Family the workloads use (default: the lower AIC)
    #[arg(long, value_enum)]
    family: Option<FamilyArg>,
    /// Bootstrap replicates for the envelope
    #[arg(long, default_value_t = REPLICATES_DEFAULT)]
    bootstrap: usize,
    /// Files per bootstrap resample (default: as many as the data hold); fewer widen the
    /// envelope to the variation of a smaller population
    #[arg(long)]
    resample_files: Option<u64>,
    /// Seed of the bootstrap, the filesets and the read orders
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FamilyArg {
    Gamma,
    GeneralizedGamma,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum WriteModeArg {
    Pipelined,
    KineticBatch,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum EnvelopeArg {
    Small,
    Fitted,
    Large,
}

#[derive(Args)]
pub struct RunArgs {
    /// A drive (HOST:PORT); repeat for several, files are placed by key hash
    #[arg(long = "drive", default_value = "127.0.0.1:8123", conflicts_with = "s3")]
    drives: Vec<String>,
    /// An S3 endpoint (http://HOST:PORT) instead of drives: each file one object, multipart
    /// from --multipart-size; needs --capacity-bytes
    #[arg(long, requires_all = ["access_key", "secret_key", "capacity_bytes"])]
    s3: Option<String>,
    /// For an https:// endpoint: the PEM certificate (the server's, or its CA's) to trust
    #[arg(long, requires = "s3")]
    tls_trust: Option<PathBuf>,
    #[arg(long, env = "SPINDLE_S3_ACCESS_KEY")]
    access_key: Option<String>,
    #[arg(long, env = "SPINDLE_S3_SECRET_KEY", hide_env_values = true)]
    secret_key: Option<String>,
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// The S3 bucket (created if missing)
    #[arg(long, default_value = "spindle-archive")]
    bucket: String,
    /// S3: files at or above this size go up as multipart uploads in parts of this size (0: never)
    #[arg(long, default_value = "16MiB", value_parser = crate::act_cmds::parse_size)]
    multipart_size: u64,
    #[command(flatten)]
    model: ModelArgs,
    /// Utilisation levels in percent of capacity, ascending
    #[arg(long, value_delimiter = ',', default_value = "25,50,75")]
    levels: Vec<f64>,
    /// Total capacity to fill (default: the drives' GETLOG CAPACITIES, summed)
    #[arg(long)]
    capacity_bytes: Option<u64>,
    /// Workloads: the bootstrap envelope's "more small files" edge, the fit, the "more large
    /// files" edge
    #[arg(long, value_enum, value_delimiter = ',', default_value = "small,fitted,large")]
    envelopes: Vec<EnvelopeArg>,
    /// Largest file drawn (bytes)
    #[arg(long, default_value_t = 256 * MIB)]
    max_file_bytes: u64,
    /// Bytes per migration batch (each ends with FLUSHALLDATA)
    #[arg(long, default_value_t = 64 * MIB)]
    batch_bytes: u64,
    /// pipelined: WRITEBACK puts, FLUSHALLDATA per batch; kinetic-batch: each file as Kinetic
    /// batches within the drive's limits
    #[arg(long, value_enum, default_value = "pipelined")]
    write_mode: WriteModeArg,
    /// Tasks per drive, one request outstanding each
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Whole-file reads per level (each file at most once)
    #[arg(long, default_value_t = 2000)]
    file_reads: u64,
    /// Fragment reads per level
    #[arg(long, default_value_t = 2000)]
    fragment_reads: u64,
    /// Bytes per fragment read (less for smaller files)
    #[arg(long, default_value_t = 64 * 1024)]
    fragment_bytes: u64,
    /// Drop the page cache before each read workload (needs root and drives on this machine)
    #[arg(long)]
    drop_caches: bool,
    /// Write the JSON results here (default: standard output)
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write SVG plots into this directory
    #[arg(long)]
    plots: Option<PathBuf>,
    /// Print a Markdown table instead of the JSON
    #[arg(long)]
    table: bool,
}

impl ModelArgs {
    fn load(&self) -> Result<(String, SizeData), Box<dyn std::error::Error>> {
        let read = |p: &PathBuf| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
        Ok(match (&self.sizes, &self.histogram) {
            (Some(p), _) => (p.display().to_string(), SizeData::Sample(parse_sizes(&read(p)?).map_err(|e| format!("{}: {e}", p.display()))?)),
            (None, Some(p)) => (p.display().to_string(), SizeData::Histogram(parse_histogram(&read(p)?).map_err(|e| format!("{}: {e}", p.display()))?)),
            (None, None) => ("the shipped illustrative histogram (synthetic)".to_string(), SizeData::Histogram(parse_histogram(ILLUSTRATIVE_HISTOGRAM)?)),
        })
    }

    fn family(&self) -> Option<Family> {
        self.family.map(|f| match f {
            FamilyArg::Gamma => Family::Gamma,
            FamilyArg::GeneralizedGamma => Family::GeneralizedGamma,
        })
    }

    fn build(&self) -> Result<archive::ModelSummary, Box<dyn std::error::Error>> {
        let (source, data) = self.load()?;
        Ok(archive::build_model(&source, &data, self.family(), self.bootstrap, self.resample_files, self.seed)?)
    }
}

pub async fn run(cmd: ArchiveCommand) -> CmdResult {
    match cmd {
        ArchiveCommand::Fit { model, json } => {
            let summary = model.build()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                print!("{}", archive::report::model_table(&summary));
                println!("\nPreferred by AIC: {}", summary.fits.preferred);
            }
            Ok(())
        }
        ArchiveCommand::Run(a) => run_archive(*a).await,
        ArchiveCommand::Plot { results, plots } => {
            let mut docs = Vec::new();
            for p in &results {
                let text = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
                docs.push(serde_json::from_slice::<serde_json::Value>(&text).map_err(|e| format!("{}: {e}", p.display()))?);
            }
            let rows = archive::report::rows_of(&docs)?;
            if let Some(dir) = &plots {
                archive::plot::write_plots(&rows, dir)?;
            }
            print!("{}", archive::report::table(&rows));
            Ok(())
        }
    }
}

async fn run_archive(a: RunArgs) -> CmdResult {
    let model = a.model.build()?;
    let s3 = a.s3.as_ref().map(|endpoint| spindle_bench::s3::client::S3Endpoint {
        endpoint: endpoint.clone(),
        region: a.region.clone(),
        bucket: a.bucket.clone(),
        access_key: a.access_key.clone().unwrap_or_default(),
        secret_key: a.secret_key.clone().unwrap_or_default(),
        tls_trust: a.tls_trust.clone(),
    });
    let spec = ArchiveSpec {
        drives: if s3.is_some() { Vec::new() } else { a.drives.clone() },
        s3,
        multipart_bytes: a.multipart_size,
        levels: a.levels.iter().map(|l| l / 100.0).collect(),
        capacity_bytes: a.capacity_bytes,
        envelopes: a
            .envelopes
            .iter()
            .map(|e| match e {
                EnvelopeArg::Small => Envelope::Small,
                EnvelopeArg::Fitted => Envelope::Fitted,
                EnvelopeArg::Large => Envelope::Large,
            })
            .collect(),
        family: a.model.family(),
        bootstrap_replicates: a.model.bootstrap,
        seed: a.model.seed,
        max_file_bytes: a.max_file_bytes,
        batch_bytes: a.batch_bytes,
        write_mode: match a.write_mode {
            WriteModeArg::Pipelined => WriteMode::Pipelined,
            WriteModeArg::KineticBatch => WriteMode::KineticBatch,
        },
        workers_per_drive: a.workers,
        file_reads: a.file_reads,
        fragment_reads: a.fragment_reads,
        fragment_bytes: a.fragment_bytes,
        drop_caches: a.drop_caches,
    };
    eprint!("{}", archive::report::model_table(&model));
    let mut write_error = None;
    let results = archive::run(spec, model, |partial| {
        if let Some(r) = partial.rows.last() {
            eprintln!(
                "{:>6} {:>4.0}% {:<16} {:>8} ops {:>9.1} MB/s {:>9.1} files/s  errors {}",
                r.envelope.name(),
                r.level * 100.0,
                r.workload,
                r.measured.files,
                r.mb_per_second,
                r.files_per_second,
                r.measured.errors
            );
        }
        // After every row the file holds valid results ("complete": false until the end).
        if let Some(path) = &a.out {
            if let Err(e) = crate::json_file::write_atomically(path, partial) {
                write_error.get_or_insert(e);
            }
        }
    })
    .await?;
    if let Some(e) = write_error {
        return Err(e);
    }
    if let Some(dir) = &a.plots {
        archive::plot::write_plots(&results.rows, dir)?;
    }
    match &a.out {
        Some(path) => crate::json_file::write_atomically(path, &results)?,
        None if !a.table => println!("{}", serde_json::to_string_pretty(&results)?),
        None => {}
    }
    if a.table {
        print!("{}", archive::report::table(&results.rows));
    }
    for note in &results.notes {
        eprintln!("note: {note}");
    }
    if let Some(note) = &results.cache_note {
        if a.drop_caches {
            eprintln!("page cache not dropped: {note}");
        }
    }
    let errors: u64 = results.rows.iter().map(|r| r.measured.errors).sum();
    if errors > 0 {
        let first = results.rows.iter().find_map(|r| r.measured.first_error.clone()).unwrap_or_default();
        return Err(format!("{errors} operations failed; first: {first}").into());
    }
    Ok(())
}
