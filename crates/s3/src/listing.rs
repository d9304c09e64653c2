//! Listings: one ordered range scan under a bucket's prefix, names grouped into common
//! prefixes at the delimiter, each group skipped in one jump (its whole key range), and a
//! resume marker (the last name or prefix returned) that a later page starts after.

use bytes::Bytes;
use s3s::S3Result;

use crate::kv::Kv;
use crate::layout;
use crate::objects::PAGE;

/// One entry of a listing in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A record: its store key and its name.
    Record(Bytes, String),
    Prefix(String),
}

#[derive(Debug, Default)]
pub struct Listed {
    pub items: Vec<Item>,
    /// More entries follow the last one.
    pub truncated: bool,
}

impl Listed {
    /// What a next page resumes after: the last name or prefix returned.
    pub fn marker(&self) -> Option<String> {
        self.items.last().map(|i| match i {
            Item::Record(_, n) | Item::Prefix(n) => n.clone(),
        })
    }
}

pub struct Query<'a> {
    /// Store-key prefix of the records (a bucket's objects or uploads).
    pub base: &'a [u8],
    pub prefix: &'a str,
    pub delimiter: Option<&'a str>,
    /// Only names (and prefixes) greater than this.
    pub after: Option<&'a str>,
    /// Where the scan starts when not just after `after` (records whose names are shared by
    /// several records: uploads of one key).
    pub start: Option<Bytes>,
    pub max: usize,
}

/// Lists records under `q.base`; `name_of` reads a record's name from its key's suffix after
/// `base` (`None`: not a record of this listing, skipped).
pub async fn list(kv: &Kv, q: &Query<'_>, name_of: impl Fn(&[u8]) -> Option<String>) -> S3Result<Listed> {
    let mut out = Listed::default();
    let under = |suffix: &[u8]| -> Bytes {
        let mut k = bytes::BytesMut::from(q.base);
        k.extend_from_slice(suffix);
        k.freeze()
    };
    let end = layout::after_prefix(&under(q.prefix.as_bytes()));
    let first = under(q.prefix.as_bytes());
    let mut from = match (&q.start, q.after) {
        (Some(s), _) => s.clone().max(first),
        (None, Some(m)) => layout::after(&under(m.as_bytes())).max(first),
        (None, None) => first,
    };
    if q.max == 0 {
        return Ok(out);
    }
    'scan: loop {
        let keys = kv.range(&from, &end, PAGE).await?;
        let exhausted = keys.len() < PAGE;
        // Past a common prefix, the page's keys under it are skipped, not asked for again.
        let mut jump: Option<Bytes> = None;
        for k in &keys {
            if jump.as_ref().is_some_and(|j| k < j) {
                continue;
            }
            let Some(name) = k.strip_prefix(q.base).and_then(&name_of) else { continue };
            let group = q.delimiter.filter(|d| !d.is_empty()).and_then(|d| {
                let rest = name.get(q.prefix.len()..)?;
                rest.find(d).map(|at| name[..q.prefix.len() + at + d.len()].to_owned())
            });
            match group {
                Some(p) => {
                    jump = Some(layout::after_prefix(&under(p.as_bytes())));
                    if q.after.is_none_or(|m| p.as_str() > m) {
                        if out.items.len() == q.max {
                            out.truncated = true;
                            break 'scan;
                        }
                        out.items.push(Item::Prefix(p));
                    }
                }
                None => {
                    if out.items.len() == q.max {
                        out.truncated = true;
                        break 'scan;
                    }
                    out.items.push(Item::Record(k.clone(), name));
                }
            }
        }
        match keys.last() {
            Some(last) if !exhausted => {
                from = layout::after(last);
                if let Some(j) = jump {
                    from = from.max(j);
                }
            }
            _ => break,
        }
    }
    Ok(out)
}
