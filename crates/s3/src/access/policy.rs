//! Bucket policies: the JSON documents of IAM's policy language, for the subset S3 users rely
//! on. Statements with Effect Allow or Deny; Principal `*` (everyone, anonymous included),
//! `{"AWS": ...}` naming users as `arn:aws:iam::ACCOUNT:user/NAME` (any account: there is one
//! here) or `*`, `{"CanonicalUser": ID}`; Action / NotAction with wildcards (`s3:Get*`);
//! Resource / NotResource as `arn:aws:s3:::BUCKET[/KEY]` with wildcards; conditions
//! StringEquals, StringNotEquals, StringLike, StringNotLike, Bool, IpAddress and NotIpAddress
//! on aws:SecureTransport, aws:SourceIp, aws:username, aws:userid, s3:prefix, s3:delimiter and
//! s3:x-amz-acl. A document outside the subset is refused when it is put (MalformedPolicy), so
//! nothing in a stored policy is ever silently ignored. An explicit Deny wins over any Allow.

use std::net::IpAddr;

use serde_json::{Map, Value};
use wildmatch::WildMatch;

/// The largest policy S3 takes.
pub const MAX_POLICY_BYTES: usize = 20 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(pub String);

fn bad(s: impl Into<String>) -> PolicyError {
    PolicyError(s.into())
}

#[derive(Debug, Clone)]
enum Who {
    Everyone,
    /// A user name, wildcards allowed.
    UserName(WildMatch),
    CanonicalId(String),
}

impl Who {
    fn everyone(&self) -> bool {
        matches!(self, Who::Everyone)
    }
}

#[derive(Debug, Clone)]
struct Test {
    op: &'static str,
    key: String,
    values: Vec<String>,
}

#[derive(Debug, Clone)]
struct Statement {
    deny: bool,
    principals: Vec<Who>,
    actions: Vec<WildMatch>,
    not_action: bool,
    resources: Vec<WildMatch>,
    not_resource: bool,
    tests: Vec<Test>,
}

/// A parsed policy; the text is kept as the client gave it.
#[derive(Debug, Clone)]
pub struct Policy {
    statements: Vec<Statement>,
}

/// What a request is, as a policy sees it.
pub struct Request<'a> {
    /// The user's name and canonical id; None for an anonymous request.
    pub user: Option<(&'a str, &'a str)>,
    /// As IAM names it: `s3:GetObject`.
    pub action: &'a str,
    /// `arn:aws:s3:::bucket` or `arn:aws:s3:::bucket/key`.
    pub resource: &'a str,
    pub secure: bool,
    pub source_ip: Option<IpAddr>,
    /// Condition keys from the request itself (`s3:prefix`, `s3:delimiter`, `s3:x-amz-acl`).
    pub keys: &'a [(&'a str, &'a str)],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Deny,
    Allow,
    /// No statement applies.
    Silent,
}

const OPERATORS: &[&str] = &["StringEquals", "StringNotEquals", "StringLike", "StringNotLike", "StringEqualsIgnoreCase", "Bool", "IpAddress", "NotIpAddress"];
const KEYS: &[&str] = &["aws:securetransport", "aws:sourceip", "aws:username", "aws:userid", "s3:prefix", "s3:delimiter", "s3:x-amz-acl"];

fn strings(v: &Value, what: &str) -> Result<Vec<String>, PolicyError> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Bool(b) => Ok(vec![b.to_string()]),
        Value::Array(items) if !items.is_empty() => items.iter().map(|i| i.as_str().map(str::to_owned).ok_or_else(|| bad(format!("{what} must be strings")))).collect(),
        _ => Err(bad(format!("{what} must be a string or a list of strings"))),
    }
}

fn principals(v: &Value) -> Result<Vec<Who>, PolicyError> {
    if v.as_str() == Some("*") {
        return Ok(vec![Who::Everyone]);
    }
    let Value::Object(map) = v else { return Err(bad("Principal must be \"*\" or an object")) };
    let mut out = Vec::new();
    for (kind, names) in map {
        for name in strings(names, "principals")? {
            out.push(match kind.as_str() {
                "AWS" if name == "*" => Who::Everyone,
                "AWS" => match name.strip_prefix("arn:aws:iam::").and_then(|r| r.split_once(':')) {
                    Some((_, rest)) => match rest.strip_prefix("user/") {
                        Some(user) if !user.is_empty() => Who::UserName(WildMatch::new(user)),
                        _ => return Err(bad(format!("Invalid principal in policy: {name} (name users as arn:aws:iam::ACCOUNT:user/NAME)"))),
                    },
                    None => return Err(bad(format!("Invalid principal in policy: {name}"))),
                },
                "CanonicalUser" => Who::CanonicalId(name),
                other => return Err(bad(format!("Invalid principal in policy: {other} principals are not supported"))),
            });
        }
    }
    Ok(out)
}

fn conditions(v: &Value) -> Result<Vec<Test>, PolicyError> {
    let Value::Object(ops) = v else { return Err(bad("Condition must be an object")) };
    let mut out = Vec::new();
    for (op, tests) in ops {
        let op = OPERATORS.iter().copied().find(|o| o == op).ok_or_else(|| bad(format!("Condition operator {op} is not supported")))?;
        let Value::Object(tests) = tests else { return Err(bad(format!("{op} must be an object"))) };
        for (key, values) in tests {
            let lower = key.to_ascii_lowercase();
            if !KEYS.contains(&lower.as_str()) {
                return Err(bad(format!("Policy has an invalid condition key: {key}")));
            }
            let values = strings(values, "condition values")?;
            if op.contains("IpAddress") {
                for v in &values {
                    cidr(v).ok_or_else(|| bad(format!("{v} is not an IP address or CIDR block")))?;
                }
            }
            out.push(Test { op, key: lower, values });
        }
    }
    Ok(out)
}

fn statement(s: &Map<String, Value>, bucket: &str) -> Result<Statement, PolicyError> {
    for k in s.keys() {
        if !["Sid", "Effect", "Principal", "Action", "NotAction", "Resource", "NotResource", "Condition"].contains(&k.as_str()) {
            return Err(bad(format!("Policy statement has an unsupported element: {k}")));
        }
    }
    let deny = match s.get("Effect").and_then(Value::as_str) {
        Some("Allow") => false,
        Some("Deny") => true,
        _ => return Err(bad("Effect must be Allow or Deny")),
    };
    let principals = principals(s.get("Principal").ok_or_else(|| bad("Statement has no Principal"))?)?;
    let (actions, not_action) = match (s.get("Action"), s.get("NotAction")) {
        (Some(a), None) => (strings(a, "Action")?, false),
        (None, Some(a)) => (strings(a, "NotAction")?, true),
        _ => return Err(bad("Statement needs exactly one of Action and NotAction")),
    };
    for a in &actions {
        if !a.to_ascii_lowercase().starts_with("s3:") && a != "*" {
            return Err(bad(format!("Policy has an invalid action: {a}")));
        }
    }
    let (resources, not_resource) = match (s.get("Resource"), s.get("NotResource")) {
        (Some(r), None) => (strings(r, "Resource")?, false),
        (None, Some(r)) => (strings(r, "NotResource")?, true),
        _ => return Err(bad("Statement needs exactly one of Resource and NotResource")),
    };
    let own = format!("arn:aws:s3:::{bucket}");
    for r in &resources {
        let m = WildMatch::new(r);
        if !(m.matches(&own) || m.matches(&format!("{own}/x")) || r.starts_with(&format!("{own}/"))) {
            return Err(bad(format!("Policy has invalid resource: {r} is not in bucket {bucket}")));
        }
    }
    let tests = match s.get("Condition") {
        Some(c) => conditions(c)?,
        None => Vec::new(),
    };
    Ok(Statement {
        deny,
        principals,
        actions: actions.iter().map(|a| WildMatch::new(&a.to_ascii_lowercase())).collect(),
        not_action,
        resources: resources.iter().map(|r| WildMatch::new(r)).collect(),
        not_resource,
        tests,
    })
}

impl Policy {
    /// Parses and checks `text` as a policy of `bucket`.
    pub fn parse(text: &str, bucket: &str) -> Result<Policy, PolicyError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(bad(format!("Policies are at most {MAX_POLICY_BYTES} bytes")));
        }
        let doc: Value = serde_json::from_str(text).map_err(|e| bad(format!("This policy contains invalid Json: {e}")))?;
        let Value::Object(doc) = doc else { return Err(bad("A policy is a JSON object")) };
        if let Some(v) = doc.get("Version").and_then(Value::as_str) {
            if v != "2012-10-17" && v != "2008-10-17" {
                return Err(bad(format!("unknown policy Version {v}")));
            }
        }
        let statements = match doc.get("Statement") {
            Some(Value::Array(list)) if !list.is_empty() => list.iter().map(|s| s.as_object().ok_or_else(|| bad("a Statement is an object")).and_then(|s| statement(s, bucket))).collect::<Result<Vec<_>, _>>()?,
            Some(Value::Object(s)) => vec![statement(s, bucket)?],
            _ => return Err(bad("Missing required field Statement")),
        };
        Ok(Policy { statements })
    }

    /// Whether a statement allows everyone something without a condition that narrows who
    /// (S3's "public" policy: what BlockPublicPolicy refuses and RestrictPublicBuckets stops).
    pub fn is_public(&self) -> bool {
        self.statements.iter().any(|s| !s.deny && s.principals.iter().any(Who::everyone) && !s.tests.iter().any(|t| t.key == "aws:sourceip" || t.key == "aws:username" || t.key == "aws:userid"))
    }

    /// The verdict for `req`; `public_ignored` drops public statements' Allows
    /// (RestrictPublicBuckets).
    pub fn verdict(&self, req: &Request<'_>, public_ignored: bool) -> Verdict {
        let mut allowed = false;
        let action = req.action.to_ascii_lowercase();
        for s in &self.statements {
            if !s.applies(req, &action) {
                continue;
            }
            if s.deny {
                return Verdict::Deny;
            }
            let public = s.principals.iter().any(Who::everyone);
            if !(public && public_ignored) {
                allowed = true;
            }
        }
        if allowed {
            Verdict::Allow
        } else {
            Verdict::Silent
        }
    }
}

impl Statement {
    /// `action`: the request's, lowercased (IAM's actions are case-insensitive).
    fn applies(&self, req: &Request<'_>, action: &str) -> bool {
        let who = self.principals.iter().any(|p| match p {
            Who::Everyone => true,
            Who::UserName(n) => req.user.is_some_and(|(name, _)| n.matches(name)),
            Who::CanonicalId(id) => req.user.is_some_and(|(_, uid)| uid == id),
        });
        let acts = self.actions.iter().any(|a| a.matches(action)) != self.not_action;
        let on = self.resources.iter().any(|r| r.matches(req.resource)) != self.not_resource;
        who && acts && on && self.tests.iter().all(|t| t.holds(req))
    }
}

impl Test {
    fn holds(&self, req: &Request<'_>) -> bool {
        let value: Option<String> = match self.key.as_str() {
            "aws:securetransport" => Some(req.secure.to_string()),
            "aws:sourceip" => req.source_ip.map(|ip| ip.to_string()),
            "aws:username" => req.user.map(|(n, _)| n.to_owned()),
            "aws:userid" => req.user.map(|(_, id)| id.to_owned()),
            key => req.keys.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| (*v).to_owned()),
        };
        let negated = matches!(self.op, "StringNotEquals" | "StringNotLike" | "NotIpAddress");
        // A key the request does not have matches no value: true only under a negation.
        let Some(v) = value else { return negated };
        let any = self.values.iter().any(|want| match self.op {
            "StringEquals" | "StringNotEquals" => *want == v,
            "StringEqualsIgnoreCase" => want.eq_ignore_ascii_case(&v),
            "StringLike" | "StringNotLike" => WildMatch::new(want).matches(&v),
            "Bool" => want.eq_ignore_ascii_case(&v),
            _ => v.parse::<IpAddr>().ok().zip(cidr(want)).is_some_and(|(ip, (net, bits))| in_net(ip, net, bits)),
        });
        any != negated
    }
}

/// `a.b.c.d/n` (or an address alone) as the network and its prefix length.
fn cidr(s: &str) -> Option<(IpAddr, u32)> {
    let (addr, bits) = match s.split_once('/') {
        Some((a, b)) => (a.parse::<IpAddr>().ok()?, b.parse::<u32>().ok()?),
        None => {
            let a = s.parse::<IpAddr>().ok()?;
            (a, if a.is_ipv4() { 32 } else { 128 })
        }
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((addr, bits))
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u32) -> bool {
    let (a, b, width) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b)), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    if bits == 0 {
        return true;
    }
    let shift = width - bits;
    (a >> shift) == (b >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(user: Option<(&'a str, &'a str)>, action: &'a str, resource: &'a str, keys: &'a [(&'a str, &'a str)]) -> Request<'a> {
        Request { user, action, resource, secure: false, source_ip: "10.1.2.3".parse().ok(), keys }
    }

    #[test]
    fn public_read_with_a_deny_for_one_user() {
        let p = Policy::parse(
            r#"{"Version":"2012-10-17","Statement":[
                {"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"},
                {"Effect":"Deny","Principal":{"AWS":"arn:aws:iam::123:user/bob"},"Action":"s3:*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]}]}"#,
            "b",
        )
        .unwrap();
        assert!(p.is_public());
        assert_eq!(p.verdict(&req(None, "s3:GetObject", "arn:aws:s3:::b/k", &[]), false), Verdict::Allow);
        assert_eq!(p.verdict(&req(None, "s3:GetObject", "arn:aws:s3:::b/k", &[]), true), Verdict::Silent, "RestrictPublicBuckets");
        assert_eq!(p.verdict(&req(None, "s3:PutObject", "arn:aws:s3:::b/k", &[]), false), Verdict::Silent);
        assert_eq!(p.verdict(&req(Some(("bob", "i")), "s3:GetObject", "arn:aws:s3:::b/k", &[]), false), Verdict::Deny);
        assert_eq!(p.verdict(&req(Some(("ann", "j")), "s3:ListBucket", "arn:aws:s3:::b", &[]), false), Verdict::Silent);
    }

    #[test]
    fn conditions_on_transport_prefix_and_address() {
        let p = Policy::parse(
            r#"{"Statement":[
                {"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*","Condition":{"Bool":{"aws:SecureTransport":"false"}}},
                {"Effect":"Allow","Principal":{"AWS":["*"]},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{"StringLike":{"s3:prefix":["home/*"]},"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}"#,
            "b",
        )
        .unwrap();
        assert!(!p.is_public(), "narrowed by address");
        let mut r = req(None, "s3:GetObject", "arn:aws:s3:::b/k", &[]);
        assert_eq!(p.verdict(&r, false), Verdict::Deny);
        r.secure = true;
        assert_eq!(p.verdict(&r, false), Verdict::Silent);
        let keys = [("s3:prefix", "home/ann")];
        assert_eq!(p.verdict(&req(None, "s3:ListBucket", "arn:aws:s3:::b", &keys), false), Verdict::Allow);
        let other = [("s3:prefix", "etc")];
        assert_eq!(p.verdict(&req(None, "s3:ListBucket", "arn:aws:s3:::b", &other), false), Verdict::Silent);
        assert_eq!(p.verdict(&req(None, "s3:ListBucket", "arn:aws:s3:::b", &[]), false), Verdict::Silent, "no prefix given");
        let mut far = req(None, "s3:ListBucket", "arn:aws:s3:::b", &keys);
        far.source_ip = "192.168.0.1".parse().ok();
        assert_eq!(p.verdict(&far, false), Verdict::Silent);
    }

    #[test]
    fn documents_outside_the_subset_are_refused() {
        for (doc, why) in [
            ("nope", "invalid Json"),
            (r#"{"Statement":[]}"#, "Statement"),
            (r#"{"Statement":[{"Effect":"Maybe","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b"}]}"#, "Effect"),
            (r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::other/*"}]}"#, "resource"),
            (r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"ec2:*","Resource":"arn:aws:s3:::b"}]}"#, "action"),
            (r#"{"Statement":[{"Effect":"Allow","Principal":{"Service":"x"},"Action":"s3:*","Resource":"arn:aws:s3:::b"}]}"#, "principal"),
            (r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b","Condition":{"DateLessThan":{"aws:CurrentTime":"x"}}}]}"#, "operator"),
            (r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b","Condition":{"StringEquals":{"aws:Referer":"x"}}}]}"#, "condition key"),
            (r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/99"}}}]}"#, "CIDR"),
        ] {
            let e = Policy::parse(doc, "b").expect_err(doc);
            assert!(e.0.contains(why), "{doc}: {e}");
        }
    }

    #[test]
    fn address_blocks() {
        let (net, bits) = cidr("10.0.0.0/8").unwrap();
        assert!(in_net("10.200.1.1".parse().unwrap(), net, bits));
        assert!(!in_net("11.0.0.1".parse().unwrap(), net, bits));
        let (net, bits) = cidr("::1").unwrap();
        assert!(in_net("::1".parse().unwrap(), net, bits));
        assert!(!in_net("127.0.0.1".parse().unwrap(), net, bits));
        assert!(in_net("1.2.3.4".parse().unwrap(), cidr("0.0.0.0/0").unwrap().0, 0));
    }
}
