//! Storage classes: which pool keeps an object's data. STANDARD is the cluster's replicated
//! pool; the operator maps colder classes to erasure-coded pools (`--storage-class
//! STANDARD_IA=cold`). An object keeps the class it was written with, and each of its segments
//! the pool its data went to, so a mapping changed later moves nothing and breaks no read.

use std::collections::BTreeMap;

use s3s::{s3_error, S3Result};

use crate::kv::Kv;
use crate::stripes::Stripes;

/// The class every object has unless its writer asks for another.
pub const STANDARD: &str = "STANDARD";

/// Storage class names S3 defines; a mapping names one of them.
const S3_CLASSES: [&str; 11] =
    ["STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER", "DEEP_ARCHIVE", "OUTPOSTS", "GLACIER_IR", "SNOW", "EXPRESS_ONEZONE"];

/// The storage classes this gateway offers besides STANDARD, each with its pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageClasses {
    pools: BTreeMap<String, String>,
    /// The class of writes that name none (none: STANDARD).
    default: Option<String>,
}

impl StorageClasses {
    /// From `CLASS=POOL` settings.
    pub fn parse(specs: &[String]) -> Result<StorageClasses, String> {
        let mut pools = BTreeMap::new();
        for spec in specs {
            let (class, pool) = spec.split_once('=').ok_or_else(|| format!("storage class {spec:?}: expected CLASS=POOL"))?;
            let (class, pool) = (class.trim().to_ascii_uppercase(), pool.trim().to_string());
            if !S3_CLASSES.contains(&class.as_str()) {
                return Err(format!("storage class {class:?} is not one S3 defines ({})", S3_CLASSES.join(", ")));
            }
            if class == STANDARD {
                return Err("STANDARD is the cluster's replicated pool; map colder classes".into());
            }
            if pool.is_empty() || pools.insert(class.clone(), pool).is_some() {
                return Err(format!("storage class {class}: one pool, named once"));
            }
        }
        Ok(StorageClasses { pools, default: None })
    }

    /// Writes that name no class get `class` (one offered, or STANDARD), as MinIO's
    /// MINIO_STORAGE_CLASS_STANDARD sets the code of theirs.
    pub fn with_default(mut self, class: &str) -> Result<StorageClasses, String> {
        let class = class.trim().to_ascii_uppercase();
        if class != STANDARD && !self.pools.contains_key(&class) {
            return Err(format!("default storage class {class}: not one this gateway offers (map it with --storage-class {class}=POOL)"));
        }
        self.default = (class != STANDARD).then_some(class);
        Ok(self)
    }

    /// Refuses mappings to pools the store does not have, to remote pools this gateway has
    /// no keys for, or to pools whose stripes cannot hold a `chunk` of an object (a code of
    /// one data shard holds a drive value less its header).
    pub fn check(&self, kv: &Kv, stripes: &Stripes, chunk: usize) -> Result<(), String> {
        let have = stripes.names(kv);
        for (class, pool) in &self.pools {
            if !have.contains(pool) {
                return Err(format!("storage class {class} is mapped to pool {pool:?}, which the store does not have ({})", if have.is_empty() { "it has no erasure-coded or remote pools".to_string() } else { have.join(", ") }));
            }
            let capacity = stripes.capacity(kv, pool).map_err(|e| format!("storage class {class}: {e}"))?;
            if capacity < chunk {
                return Err(format!("storage class {class}: pool {pool:?} takes stripes of at most {capacity} bytes, less than the gateway's {chunk}-byte chunks (a code of two or more data shards does)"));
            }
        }
        Ok(())
    }

    /// The class a request names (none: STANDARD) as kept, and the pool that keeps it (none:
    /// the replicated pool).
    pub fn resolve(&self, asked: Option<&str>) -> S3Result<(Option<String>, Option<String>)> {
        match asked.or(self.default.as_deref()) {
            None | Some(STANDARD) => Ok((None, None)),
            Some(class) => match self.pools.get(class) {
                Some(pool) => Ok((Some(class.to_string()), Some(pool.clone()))),
                None => Err(s3_error!(InvalidStorageClass, "The storage class you specified is not valid: this gateway offers {}", self.offered())),
            },
        }
    }

    fn offered(&self) -> String {
        std::iter::once(STANDARD).chain(self.pools.keys().map(String::as_str)).collect::<Vec<_>>().join(", ")
    }
}

/// An object's class as S3 names it.
pub fn name(kept: Option<&str>) -> &str {
    kept.unwrap_or(STANDARD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_map_to_pools_and_others_are_refused() {
        let c = StorageClasses::parse(&["standard_ia=cold".into(), "GLACIER_IR = colder".into()]).unwrap();
        assert_eq!(c.resolve(None).unwrap(), (None, None));
        let cold = c.clone().with_default("standard_ia").unwrap();
        assert_eq!(cold.resolve(None).unwrap(), (Some("STANDARD_IA".into()), Some("cold".into())));
        assert_eq!(cold.resolve(Some("STANDARD")).unwrap(), (None, None));
        assert!(c.clone().with_default("GLACIER").is_err());
        assert_eq!(c.resolve(Some("STANDARD")).unwrap(), (None, None));
        assert_eq!(c.resolve(Some("STANDARD_IA")).unwrap(), (Some("STANDARD_IA".into()), Some("cold".into())));
        let e = c.resolve(Some("DEEP_ARCHIVE")).unwrap_err();
        assert_eq!(e.code().as_str(), "InvalidStorageClass");
        assert!(e.message().unwrap().contains("STANDARD, GLACIER_IR, STANDARD_IA"));
        for bad in ["X=cold", "STANDARD=cold", "STANDARD_IA", "STANDARD_IA=", "GLACIER=a"] {
            let specs = if bad == "GLACIER=a" { vec![bad.to_string(), bad.to_string()] } else { vec![bad.to_string()] };
            assert!(StorageClasses::parse(&specs).is_err(), "{bad}");
        }
    }
}
