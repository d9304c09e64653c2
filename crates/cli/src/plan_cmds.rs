//! `spindle plan`: the storage-tier design from a catalogue (see `spindle_plan`).

use std::path::PathBuf;

use clap::Args;
use spindle_plan::{plan, render_text, Catalogue};

#[derive(Args)]
pub struct PlanArgs {
    /// Catalogue (TOML): node types, drive types with throughput curves, and the scenario
    /// ([targets], [caps], [costs]) that the flags below override. Example:
    /// docs/plan/example-catalogue.toml
    catalogue: PathBuf,
    /// Usable capacity to provide, TB
    #[arg(long)]
    capacity_tb: Option<f64>,
    /// Usable share of raw capacity (1/3 for three replicas, 0.8 for 8+2)
    #[arg(long)]
    usable_fraction: Option<f64>,
    /// Sequential-write throughput to provide, MB/s (client-visible)
    #[arg(long)]
    sequential_write_mb_s: Option<f64>,
    /// Random-read throughput to provide, MB/s
    #[arg(long)]
    random_read_mb_s: Option<f64>,
    /// Bytes written to drives per client byte (replicas, parity)
    #[arg(long)]
    write_amplification: Option<f64>,
    /// Workload value size in bytes, for curves measured per value size
    #[arg(long)]
    value_size: Option<u64>,
    /// At least this many nodes
    #[arg(long)]
    nodes_min: Option<u32>,
    /// Cap on the capital cost
    #[arg(long)]
    capital_cost_max: Option<f64>,
    /// Cap on the power draw, W (before PUE)
    #[arg(long)]
    power_w_max: Option<f64>,
    /// Drop the catalogue's caps (flags given here still apply)
    #[arg(long)]
    no_caps: bool,
    /// Horizon over which power is paid, years (0: capital cost only)
    #[arg(long)]
    years: Option<f64>,
    /// Electricity price per kWh
    #[arg(long)]
    electricity_per_kwh: Option<f64>,
    /// Power usage effectiveness (facility W per equipment W)
    #[arg(long)]
    pue: Option<f64>,
    /// Weigh redundancy schemes for the same targets: a comma-separated list of R<replicas>
    /// and DATA+PARITY codes (e.g. R3,4+2,8+3); each sets the usable share, the write
    /// amplification and the nodes a stripe needs
    #[arg(long, value_delimiter = ',', conflicts_with = "hot_share")]
    compare: Vec<spindle_plan::redundancy::Redundancy>,
    /// Two tiers: this share of the capacity hot (--hot), the rest cold (--cold), the cold
    /// tier taking the same write stream and few reads
    #[arg(long, requires_all = ["hot", "cold"])]
    hot_share: Option<f64>,
    /// The hot tier's scheme (e.g. R3)
    #[arg(long)]
    hot: Option<spindle_plan::redundancy::Redundancy>,
    /// The cold tier's scheme (e.g. 8+3)
    #[arg(long)]
    cold: Option<spindle_plan::redundancy::Redundancy>,
    /// Print the design as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(a: PlanArgs) -> Result<(), Box<dyn std::error::Error>> {
    let catalogue = Catalogue::load(&a.catalogue)?;
    let mut scenario = catalogue.scenario.clone();
    let t = &mut scenario.targets;
    override_with(&mut t.capacity_tb, a.capacity_tb);
    override_with(&mut t.usable_fraction, a.usable_fraction);
    override_with(&mut t.sequential_write_mb_s, a.sequential_write_mb_s);
    override_with(&mut t.random_read_mb_s, a.random_read_mb_s);
    override_with(&mut t.write_amplification, a.write_amplification);
    override_with(&mut t.nodes_min, a.nodes_min);
    t.value_size = a.value_size.or(t.value_size);
    if a.no_caps {
        scenario.caps = Default::default();
    }
    let caps = &mut scenario.caps;
    caps.capital_cost_max = a.capital_cost_max.or(caps.capital_cost_max);
    caps.power_w_max = a.power_w_max.or(caps.power_w_max);
    let costs = &mut scenario.costs;
    costs.years = a.years.or(costs.years);
    costs.electricity_per_kwh = a.electricity_per_kwh.or(costs.electricity_per_kwh);
    override_with(&mut costs.pue, a.pue);
    if !a.compare.is_empty() {
        let rows = spindle_plan::redundancy::compare(&catalogue, &scenario, &a.compare);
        if a.json {
            let out: Vec<_> = rows.iter().map(|(r, w)| match w {
                Ok(w) => serde_json::to_value(w).unwrap_or_default(),
                Err(e) => serde_json::json!({"redundancy": r.to_string(), "error": e.to_string()}),
            }).collect();
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print!("{}", spindle_plan::redundancy::render_compare(&rows));
        }
        return Ok(());
    }
    if let (Some(share), Some(hot), Some(cold)) = (a.hot_share, a.hot, a.cold) {
        let tiers = spindle_plan::redundancy::two_tier(&catalogue, &scenario, share, hot, cold)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&tiers)?);
        } else {
            print!("{}", spindle_plan::redundancy::render_two_tier(&tiers));
        }
        return Ok(());
    }
    let design = plan(&catalogue, &scenario)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&design)?);
    } else {
        print!("{}", render_text(&design));
    }
    Ok(())
}

fn override_with<T>(field: &mut T, flag: Option<T>) {
    if let Some(value) = flag {
        *field = value;
    }
}
