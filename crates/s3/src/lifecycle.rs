//! Bucket lifecycle rules: which objects move to a colder storage class, which expire, which
//! unfinished uploads are aborted, and after how long (S3's lifecycle configuration). The
//! rules are checked as S3 checks them when set, kept in the bucket's record, and applied by
//! the gateway's lifecycle pass (`lifecycle_pass`).

use std::collections::BTreeSet;

use s3s::dto::{
    AbortIncompleteMultipartUpload, ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleAndOperator, LifecycleRuleFilter, Tag, Transition, TransitionStorageClass,
};
use s3s::{s3_error, S3Result};

use crate::classes::StorageClasses;
use crate::records::Manifest;
pub use crate::records::{Filter, Rule, When};

/// Most rules a bucket's configuration holds (S3's limit).
pub const MAX_RULES: usize = 1000;
/// Longest rule id (S3's limit).
pub const MAX_RULE_ID: usize = 255;
const DAY_MS: u64 = 86_400_000;

impl When {
    /// Whether the action is due for an object written at `since_ms`, `now_ms` being now and a
    /// day lasting `day_ms` (a day, except where tests shorten it).
    fn due(self, since_ms: u64, now_ms: u64, day_ms: u64) -> bool {
        match self {
            When::Days(d) => since_ms.saturating_add(u64::from(d).saturating_mul(day_ms)) <= now_ms,
            When::Date(at) => at <= now_ms,
        }
    }

    fn of(days: Option<i32>, date: Option<&s3s::dto::Timestamp>, what: &str) -> S3Result<Option<When>> {
        match (days, date) {
            (Some(_), Some(_)) => Err(s3_error!(MalformedXML, "{what}: Days and Date cannot both be given")),
            (Some(d), None) if d < 0 => Err(s3_error!(InvalidArgument, "{what}: Days must not be negative")),
            (Some(d), None) => Ok(Some(When::Days(d as u32))),
            (None, Some(t)) => {
                let ms = timestamp_ms(t)?;
                if ms % DAY_MS != 0 {
                    return Err(s3_error!(InvalidArgument, "{what}: Date must be at midnight UTC"));
                }
                Ok(Some(When::Date(ms)))
            }
            (None, None) => Ok(None),
        }
    }

    fn days(self) -> Option<i32> {
        match self {
            When::Days(d) => Some(d as i32),
            When::Date(_) => None,
        }
    }

    fn date(self) -> Option<s3s::dto::Timestamp> {
        match self {
            When::Date(ms) => Some(s3s::dto::Timestamp::from(crate::records::time_of(ms))),
            When::Days(_) => None,
        }
    }
}

fn timestamp_ms(t: &s3s::dto::Timestamp) -> S3Result<u64> {
    let mut buf = Vec::new();
    t.format(s3s::dto::TimestampFormat::EpochSeconds, &mut buf).map_err(|_| s3_error!(InvalidArgument, "a date out of range"))?;
    let secs: f64 = std::str::from_utf8(&buf).ok().and_then(|s| s.parse().ok()).ok_or_else(|| s3_error!(InvalidArgument, "a date out of range"))?;
    if secs < 0.0 {
        return Err(s3_error!(InvalidArgument, "a date before 1970"));
    }
    Ok((secs * 1000.0) as u64)
}

impl Filter {
    pub fn matches(&self, key: &str, m: &Manifest) -> bool {
        key.starts_with(&self.prefix)
            && self.tags.iter().all(|(k, v)| m.tags.get(k) == Some(v))
            && self.larger_than.is_none_or(|n| m.size > n)
            && self.smaller_than.is_none_or(|n| m.size < n)
    }
}

/// What the rules call for on one object's current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Expire,
    /// To this storage class.
    Transition(String),
}

/// The action due for `m` (key `key`) under `rules`: expiration before any transition; of the
/// transitions due, the one due last, unless the object is in that class already.
pub fn due(rules: &[Rule], key: &str, m: &Manifest, now_ms: u64, day_ms: u64) -> Option<Action> {
    let live: Vec<&Rule> = rules.iter().filter(|r| r.enabled && r.filter.matches(key, m)).collect();
    if live.iter().any(|r| r.expiration.is_some_and(|w| w.due(m.modified_ms, now_ms, day_ms))) {
        return Some(Action::Expire);
    }
    let latest = live
        .iter()
        .flat_map(|r| r.transitions.iter())
        .filter(|(_, w)| w.due(m.modified_ms, now_ms, day_ms))
        .max_by_key(|(_, w)| match w {
            When::Days(d) => m.modified_ms.saturating_add(u64::from(*d) * day_ms),
            When::Date(at) => *at,
        })?;
    let current = crate::classes::name(m.class.storage_class.as_deref());
    (latest.0 != current).then(|| Action::Transition(latest.0.clone()))
}

/// Whether an upload started at `initiated_ms` for `key` is to be aborted.
pub fn abort_due(rules: &[Rule], key: &str, initiated_ms: u64, now_ms: u64, day_ms: u64) -> bool {
    rules.iter().filter(|r| r.enabled && key.starts_with(&r.filter.prefix)).filter_map(|r| r.abort_uploads_after_days).any(|d| When::Days(d).due(initiated_ms, now_ms, day_ms))
}

/// The rules of a PutBucketLifecycleConfiguration, checked as S3 checks them.
pub fn from_s3(rules: Vec<LifecycleRule>, classes: &StorageClasses) -> S3Result<Vec<Rule>> {
    if rules.is_empty() || rules.len() > MAX_RULES {
        return Err(s3_error!(MalformedXML, "a lifecycle configuration has 1 to {MAX_RULES} rules"));
    }
    let mut ids = BTreeSet::new();
    rules.into_iter().map(|r| rule_from_s3(r, classes, &mut ids)).collect()
}

fn rule_from_s3(r: LifecycleRule, classes: &StorageClasses, ids: &mut BTreeSet<String>) -> S3Result<Rule> {
    if let Some(id) = &r.id {
        if id.len() > MAX_RULE_ID {
            return Err(s3_error!(InvalidArgument, "ID length should not exceed allowed limit of {MAX_RULE_ID}"));
        }
        if !ids.insert(id.clone()) {
            return Err(s3_error!(InvalidArgument, "Rule ID must be unique. Found same ID for more than one rule"));
        }
    }
    let enabled = match r.status.as_str() {
        ExpirationStatus::ENABLED => true,
        ExpirationStatus::DISABLED => false,
        other => return Err(s3_error!(MalformedXML, "Status must be Enabled or Disabled, not {other:?}")),
    };
    let filter = filter_from_s3(r.filter, r.prefix)?;
    let mut transitions = Vec::new();
    for t in r.transitions.unwrap_or_default() {
        let class = t.storage_class.map(|c| c.as_str().to_owned()).ok_or_else(|| s3_error!(MalformedXML, "a Transition names its StorageClass"))?;
        let (kept, _) = classes.resolve(Some(&class))?;
        if kept.is_none() {
            return Err(s3_error!(InvalidStorageClass, "a Transition goes to a colder class than STANDARD"));
        }
        let when = When::of(t.days, t.date.as_ref(), "Transition")?.ok_or_else(|| s3_error!(MalformedXML, "a Transition has Days or Date"))?;
        transitions.push((class, when));
    }
    let expiration = match r.expiration {
        Some(e) => {
            if e.expired_object_delete_marker.is_some_and(|m| m) {
                return Err(s3_error!(InvalidRequest, "ExpiredObjectDeleteMarker is not offered: delete markers are removed by DeleteObject with their version id"));
            }
            let when = When::of(e.days, e.date.as_ref(), "Expiration")?;
            if when == Some(When::Days(0)) {
                return Err(s3_error!(InvalidArgument, "'Days' for Expiration action must be a positive integer"));
            }
            when
        }
        None => None,
    };
    let abort = r.abort_incomplete_multipart_upload.and_then(|a| a.days_after_initiation);
    if abort.is_some_and(|d| d <= 0) {
        return Err(s3_error!(InvalidArgument, "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer"));
    }
    if abort.is_some() && (!filter.tags.is_empty() || filter.larger_than.is_some() || filter.smaller_than.is_some()) {
        return Err(s3_error!(InvalidRequest, "AbortIncompleteMultipartUpload cannot be specified with Tags or object sizes"));
    }
    if r.noncurrent_version_expiration.is_some() || r.noncurrent_version_transitions.is_some_and(|t| !t.is_empty()) {
        return Err(s3_error!(InvalidRequest, "NoncurrentVersionExpiration and NoncurrentVersionTransition are not offered: rules act on current versions; noncurrent ones are removed by DeleteObject with their version id"));
    }
    let rule = Rule {
        id: r.id,
        enabled,
        filter,
        transitions,
        expiration,
        abort_uploads_after_days: abort.map(|d| d as u32),
    };
    if rule.transitions.is_empty() && rule.expiration.is_none() && rule.abort_uploads_after_days.is_none() {
        return Err(s3_error!(InvalidRequest, "At least one action needs to be specified in a rule"));
    }
    Ok(rule)
}

fn filter_from_s3(filter: Option<LifecycleRuleFilter>, old_prefix: Option<String>) -> S3Result<Filter> {
    let Some(f) = filter else { return Ok(Filter { prefix: old_prefix.unwrap_or_default(), ..Filter::default() }) };
    if old_prefix.is_some() {
        return Err(s3_error!(MalformedXML, "a rule has a Filter or a Prefix, not both"));
    }
    let given = usize::from(f.prefix.is_some()) + usize::from(f.tag.is_some()) + usize::from(f.and.is_some()) + usize::from(f.object_size_greater_than.is_some()) + usize::from(f.object_size_less_than.is_some());
    if given > 1 {
        return Err(s3_error!(MalformedXML, "a Filter holds one condition; combine them with And"));
    }
    let size = |n: Option<i64>| n.map(|n| n.max(0) as u64);
    let mut out = Filter { prefix: f.prefix.unwrap_or_default(), larger_than: size(f.object_size_greater_than), smaller_than: size(f.object_size_less_than), ..Filter::default() };
    if let Some(t) = f.tag {
        out.tags.insert(t.key.unwrap_or_default(), t.value.unwrap_or_default());
    }
    if let Some(and) = f.and {
        out.prefix = and.prefix.unwrap_or_default();
        out.larger_than = size(and.object_size_greater_than);
        out.smaller_than = size(and.object_size_less_than);
        for t in and.tags.unwrap_or_default() {
            if out.tags.insert(t.key.unwrap_or_default(), t.value.unwrap_or_default()).is_some() {
                return Err(s3_error!(InvalidRequest, "Duplicate Tag Keys are not allowed"));
            }
        }
    }
    Ok(out)
}

/// The rules as GetBucketLifecycleConfiguration answers them.
pub fn to_s3(rules: &[Rule]) -> Vec<LifecycleRule> {
    rules.iter().map(rule_to_s3).collect()
}

fn rule_to_s3(r: &Rule) -> LifecycleRule {
    let f = &r.filter;
    let tag = |(k, v): (&String, &String)| Tag { key: Some(k.clone()), value: Some(v.clone()) };
    let conditions = usize::from(!f.prefix.is_empty()) + f.tags.len() + usize::from(f.larger_than.is_some()) + usize::from(f.smaller_than.is_some());
    let filter = if conditions > 1 {
        LifecycleRuleFilter {
            and: Some(LifecycleRuleAndOperator {
                prefix: (!f.prefix.is_empty()).then(|| f.prefix.clone()),
                tags: (!f.tags.is_empty()).then(|| f.tags.iter().map(tag).collect()),
                object_size_greater_than: f.larger_than.map(|n| n as i64),
                object_size_less_than: f.smaller_than.map(|n| n as i64),
            }),
            ..LifecycleRuleFilter::default()
        }
    } else {
        LifecycleRuleFilter {
            prefix: Some(f.prefix.clone()).filter(|p| !p.is_empty() || conditions == 0),
            tag: f.tags.iter().next().map(tag),
            object_size_greater_than: f.larger_than.map(|n| n as i64),
            object_size_less_than: f.smaller_than.map(|n| n as i64),
            ..LifecycleRuleFilter::default()
        }
    };
    LifecycleRule {
        id: r.id.clone(),
        status: ExpirationStatus::from_static(if r.enabled { ExpirationStatus::ENABLED } else { ExpirationStatus::DISABLED }),
        filter: Some(filter),
        transitions: (!r.transitions.is_empty()).then(|| {
            r.transitions.iter().map(|(c, w)| Transition { days: w.days(), date: w.date(), storage_class: Some(TransitionStorageClass::from(c.clone())) }).collect()
        }),
        expiration: r.expiration.map(|w| LifecycleExpiration { days: w.days(), date: w.date(), expired_object_delete_marker: None }),
        abort_incomplete_multipart_upload: r.abort_uploads_after_days.map(|d| AbortIncompleteMultipartUpload { days_after_initiation: Some(d as i32) }),
        noncurrent_version_expiration: None,
        noncurrent_version_transitions: None,
        prefix: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(size: u64, modified_ms: u64, class: Option<&str>) -> Manifest {
        let mut m = Manifest { size, modified_ms, ..Manifest::default() };
        m.class.storage_class = class.map(str::to_owned);
        m
    }

    fn rule(prefix: &str) -> Rule {
        Rule { id: None, enabled: true, filter: Filter { prefix: prefix.into(), ..Filter::default() }, transitions: vec![], expiration: None, abort_uploads_after_days: None }
    }

    #[test]
    fn expiration_wins_and_the_latest_transition_due_is_taken() {
        let day = 1000;
        let mut r = rule("logs/");
        r.transitions = vec![("STANDARD_IA".into(), When::Days(1)), ("GLACIER_IR".into(), When::Days(3))];
        r.expiration = Some(When::Days(10));
        let rules = vec![r];
        let m = manifest(5, 0, None);
        assert_eq!(due(&rules, "logs/a", &m, 999, day), None);
        assert_eq!(due(&rules, "logs/a", &m, 1000, day), Some(Action::Transition("STANDARD_IA".into())));
        assert_eq!(due(&rules, "logs/a", &manifest(5, 0, Some("STANDARD_IA")), 1500, day), None);
        assert_eq!(due(&rules, "logs/a", &manifest(5, 0, Some("STANDARD_IA")), 3000, day), Some(Action::Transition("GLACIER_IR".into())));
        assert_eq!(due(&rules, "logs/a", &m, 10_000, day), Some(Action::Expire));
        assert_eq!(due(&rules, "other/a", &m, 10_000, day), None);
        let mut off = rules.clone();
        off[0].enabled = false;
        assert_eq!(due(&off, "logs/a", &m, 10_000, day), None);
    }

    #[test]
    fn filters_take_tags_and_sizes() {
        let f = Filter { prefix: "a".into(), tags: [("k".to_string(), "v".to_string())].into(), larger_than: Some(10), smaller_than: Some(100) };
        let mut m = manifest(50, 0, None);
        assert!(!f.matches("ab", &m));
        m.tags.insert("k".into(), "v".into());
        assert!(f.matches("ab", &m) && !f.matches("b", &m));
        m.size = 100;
        assert!(!f.matches("ab", &m));
    }

    #[test]
    fn configurations_are_checked_as_s3_checks_them_and_read_back() {
        let classes = StorageClasses::parse(&["STANDARD_IA=cold".into()]).unwrap();
        let enabled = ExpirationStatus::from_static(ExpirationStatus::ENABLED);
        let transition = Transition { days: Some(30), date: None, storage_class: Some(TransitionStorageClass::from_static(TransitionStorageClass::STANDARD_IA)) };
        let good = LifecycleRule {
            id: Some("move".into()),
            status: enabled.clone(),
            filter: Some(LifecycleRuleFilter { and: Some(LifecycleRuleAndOperator { prefix: Some("logs/".into()), tags: Some(vec![Tag { key: Some("t".into()), value: Some("1".into()) }]), ..Default::default() }), ..Default::default() }),
            transitions: Some(vec![transition.clone()]),
            expiration: Some(LifecycleExpiration { days: Some(365), ..Default::default() }),
            abort_incomplete_multipart_upload: None,
            noncurrent_version_expiration: None,
            noncurrent_version_transitions: None,
            prefix: None,
        };
        let rules = from_s3(vec![good.clone()], &classes).unwrap();
        assert_eq!(rules[0].filter.prefix, "logs/");
        let back = from_s3(to_s3(&rules), &classes).unwrap();
        assert_eq!(back, rules);
        let bad = |r: LifecycleRule| from_s3(vec![r], &classes).unwrap_err().code().as_str().to_owned();
        assert_eq!(bad(LifecycleRule { transitions: Some(vec![Transition { storage_class: Some(TransitionStorageClass::from_static(TransitionStorageClass::GLACIER)), ..transition.clone() }]), ..good.clone() }), "InvalidStorageClass");
        assert_eq!(bad(LifecycleRule { expiration: Some(LifecycleExpiration { days: Some(0), ..Default::default() }), transitions: None, ..good.clone() }), "InvalidArgument");
        assert_eq!(bad(LifecycleRule { expiration: None, transitions: None, ..good.clone() }), "InvalidRequest");
        assert_eq!(bad(LifecycleRule { abort_incomplete_multipart_upload: Some(AbortIncompleteMultipartUpload { days_after_initiation: Some(1) }), ..good.clone() }), "InvalidRequest");
        assert_eq!(from_s3(vec![good.clone(), good], &classes).unwrap_err().code().as_str(), "InvalidArgument");
        assert_eq!(from_s3(vec![], &classes).unwrap_err().code().as_str(), "MalformedXML");
    }
}
