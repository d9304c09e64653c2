//! What a design must reach (targets) and stay under (caps): named apart from the model so
//! that errors can speak of them without importing the model.

/// A quantity the design must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    Capacity,
    SequentialWrite,
    RandomRead,
    Nodes,
}

impl Target {
    pub const ALL: [Target; 4] = [Target::Capacity, Target::SequentialWrite, Target::RandomRead, Target::Nodes];

    pub fn unit(self) -> &'static str {
        match self {
            Target::Capacity => "TB",
            Target::SequentialWrite | Target::RandomRead => "MB/s",
            Target::Nodes => "nodes",
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Target::Capacity => "usable capacity",
            Target::SequentialWrite => "sequential-write",
            Target::RandomRead => "random-read",
            Target::Nodes => "node count",
        })
    }
}

/// A quantity the design must stay under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cap {
    CapitalCost,
    Power,
}

impl Cap {
    /// Money carries the catalogue's currency label, printed by the caller.
    pub fn unit(self) -> &'static str {
        match self {
            Cap::CapitalCost => "",
            Cap::Power => "W",
        }
    }
}

impl std::fmt::Display for Cap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cap::CapitalCost => "capital cost cap",
            Cap::Power => "power cap",
        })
    }
}
