//! Cross-origin resource sharing: a bucket's CORS rules (kept in its record), which rule
//! answers a browser's request, and the headers that answer carries. The preflight (OPTIONS)
//! is answered by the server before s3s sees it, unsigned as browsers send it; an actual
//! request's answer gets the rule's headers after it is served.

use http::{HeaderMap, HeaderValue};

pub use crate::records::CorsRule;
use crate::kv::KvError;
use crate::layout;
use crate::objects::Core;
use crate::records::{self, BucketRecord};

/// S3's limits: rules per bucket, the size of a configuration (its stored form), and the
/// methods a rule may allow.
pub const MAX_RULES: usize = 100;
pub const MAX_CONFIGURATION_BYTES: usize = 64 * 1024;
/// Headers a preflight may ask for; one asking more is refused without matching.
const MAX_ASKED_HEADERS: usize = 100;
const METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];

/// Refuses what S3 refuses: no rules or too many, a method S3 does not know, an origin or
/// header pattern with more than one `*`, a negative max age.
pub fn check(rules: &[CorsRule]) -> Result<(), String> {
    if rules.is_empty() || rules.len() > MAX_RULES {
        return Err(format!("a CORS configuration has 1 to {MAX_RULES} rules"));
    }
    if records::encode(&rules).len() > MAX_CONFIGURATION_BYTES {
        return Err(format!("a CORS configuration is at most {MAX_CONFIGURATION_BYTES} bytes"));
    }
    for r in rules {
        if r.allowed_origins.is_empty() || r.allowed_methods.is_empty() {
            return Err("every CORS rule names at least one origin and one method".into());
        }
        if let Some(m) = r.allowed_methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
            return Err(format!("Found unsupported HTTP method in CORS config. Unsupported method is {m}"));
        }
        if let Some(p) = r.allowed_origins.iter().chain(&r.allowed_headers).find(|p| p.matches('*').count() > 1) {
            return Err(format!("{p} can not have more than one wildcard."));
        }
        if r.max_age_seconds.is_some_and(|s| s < 0) {
            return Err("MaxAgeSeconds must not be negative".into());
        }
    }
    Ok(())
}

/// Whether `value` matches `pattern`, which holds at most one `*` standing for any run of
/// characters (case-insensitive for headers, exact for origins).
fn matches(pattern: &str, value: &str, fold_case: bool) -> bool {
    let (p, v) = if fold_case { (pattern.to_ascii_lowercase(), value.to_ascii_lowercase()) } else { (pattern.to_owned(), value.to_owned()) };
    match p.split_once('*') {
        None => p == v,
        Some((head, tail)) => v.len() >= head.len() + tail.len() && v.starts_with(head) && v.ends_with(tail),
    }
}

/// The first rule that allows `origin` to send `method` with `headers` (S3 takes the first).
pub fn find<'a>(rules: &'a [CorsRule], origin: &str, method: &str, headers: &[&str]) -> Option<&'a CorsRule> {
    rules.iter().find(|r| {
        r.allowed_origins.iter().any(|o| matches(o, origin, false))
            && r.allowed_methods.iter().any(|m| m == method)
            && headers.iter().all(|h| r.allowed_headers.iter().any(|a| matches(a, h, true)))
    })
}

/// The headers of an answer `rule` allows: the origin (or `*` for a rule open to every
/// origin), the methods, what the browser may read of the answer and, for a preflight, the
/// headers asked for and how long the answer may be cached.
pub fn headers(rule: &CorsRule, origin: &str, preflight_headers: Option<&[&str]>) -> HeaderMap {
    let mut h = HeaderMap::new();
    let mut put = |name: &'static str, value: String| {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    };
    let any = rule.allowed_origins.iter().any(|o| o == "*");
    put("access-control-allow-origin", if any { "*".into() } else { origin.to_owned() });
    if !any {
        put("access-control-allow-credentials", "true".into());
    }
    put("access-control-allow-methods", rule.allowed_methods.join(", "));
    if !rule.expose_headers.is_empty() {
        put("access-control-expose-headers", rule.expose_headers.join(", "));
    }
    if let Some(asked) = preflight_headers {
        if !asked.is_empty() {
            put("access-control-allow-headers", asked.iter().map(|a| a.to_ascii_lowercase()).collect::<Vec<_>>().join(", "));
        }
        if let Some(age) = rule.max_age_seconds {
            put("access-control-max-age", age.to_string());
        }
    }
    put("vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method".into());
    h
}

/// The CORS rules of `bucket` (none: no such bucket, or no configuration); an error when the
/// store does not answer.
pub async fn rules_of(core: &Core, bucket: &str) -> Result<Option<Vec<CorsRule>>, KvError> {
    let Some(stored) = core.kv.get(&layout::bucket(bucket)).await? else { return Ok(None) };
    Ok(records::decode::<BucketRecord>("bucket", &stored.value).ok().and_then(|r| r.cors))
}

/// The answer to a preflight (OPTIONS) request: 200 with the headers of the rule that allows
/// what the browser asks, 403 when none does, 400 when it asks nothing.
pub async fn preflight(core: &Core, path: &str, asked: &HeaderMap) -> hyper::Response<s3s::Body> {
    let text = |h: &str| asked.get(h).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let (Some(origin), Some(method)) = (text("origin"), text("access-control-request-method")) else {
        return refusal(hyper::StatusCode::BAD_REQUEST, "BadRequest", "Insufficient information. Origin and Access-Control-Request-Method request headers needed.");
    };
    let wanted = text("access-control-request-headers").unwrap_or_default();
    let wanted: Vec<&str> = wanted.split(',').map(str::trim).filter(|h| !h.is_empty()).collect();
    if wanted.len() > MAX_ASKED_HEADERS {
        return refusal(hyper::StatusCode::BAD_REQUEST, "BadRequest", "A preflight asks for at most 100 headers.");
    }
    let rules = match bucket_of(path) {
        Some(b) => rules_of(core, b).await,
        None => Ok(None),
    };
    let rules = match rules {
        Ok(Some(rules)) => rules,
        Ok(None) => return refusal(hyper::StatusCode::FORBIDDEN, "AccessForbidden", "CORSResponse: CORS is not enabled for this bucket."),
        Err(_) => return refusal(hyper::StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", "The store did not answer; retry later."),
    };
    match find(&rules, &origin, &method, &wanted) {
        Some(rule) => {
            let mut answer = hyper::Response::new(s3s::Body::empty());
            answer.headers_mut().extend(headers(rule, &origin, Some(&wanted)));
            answer
        }
        None => refusal(
            hyper::StatusCode::FORBIDDEN,
            "AccessForbidden",
            "CORSResponse: This CORS request is not allowed. This is usually because the evaluation of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not allowed by the bucket's CORS configuration.",
        ),
    }
}

/// Adds the CORS headers of the rule that allows `origin`'s `method` to an actual request's
/// answer (nothing when no rule does: the browser then withholds the answer from the page).
pub async fn decorate(core: &Core, path: &str, origin: &str, method: &http::Method, answer: &mut HeaderMap) {
    let Some(bucket) = bucket_of(path) else { return };
    // Without the rules the answer goes without CORS headers: the page sees a CORS error.
    let Ok(Some(rules)) = rules_of(core, bucket).await else { return };
    if let Some(rule) = find(&rules, origin, method.as_str(), &[]) {
        answer.extend(headers(rule, origin, None));
    }
}

fn refusal(status: hyper::StatusCode, code: &str, message: &str) -> hyper::Response<s3s::Body> {
    let body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>");
    let mut answer = hyper::Response::new(s3s::Body::from(body));
    *answer.status_mut() = status;
    answer.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/xml"));
    answer
}

/// The bucket a path-style request names (`/bucket/key...`).
pub fn bucket_of(path: &str) -> Option<&str> {
    let b = path.trim_start_matches('/').split('/').next()?;
    (!b.is_empty()).then_some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> CorsRule {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        CorsRule { allowed_origins: owned(origins), allowed_methods: owned(methods), allowed_headers: owned(headers), ..CorsRule::default() }
    }

    #[test]
    fn the_first_rule_allowing_origin_method_and_headers_answers() {
        let rules = [rule(&["https://*.example.com"], &["GET"], &[]), rule(&["*"], &["PUT", "GET"], &["x-amz-*", "content-type"])];
        assert_eq!(find(&rules, "https://app.example.com", "GET", &[]), Some(&rules[0]));
        assert_eq!(find(&rules, "https://other.org", "GET", &[]), Some(&rules[1]));
        assert_eq!(find(&rules, "https://app.example.com", "PUT", &["X-Amz-Date", "Content-Type"]), Some(&rules[1]));
        assert_eq!(find(&rules, "https://app.example.com", "PUT", &["authorization"]), None);
        assert_eq!(find(&rules, "https://app.example.com", "DELETE", &[]), None);
        assert!(!matches("https://*.example.com", "https://example.com", false));
    }

    #[test]
    fn answers_name_the_origin_or_everyone() {
        let open = rule(&["*"], &["GET"], &[]);
        let h = headers(&open, "https://a.org", Some(&[]));
        assert_eq!(h["access-control-allow-origin"], "*");
        assert!(h.get("access-control-allow-credentials").is_none());
        let own = CorsRule { max_age_seconds: Some(600), expose_headers: vec!["ETag".into()], ..rule(&["https://a.org"], &["GET", "PUT"], &["*"]) };
        let h = headers(&own, "https://a.org", Some(&["X-Amz-Date"]));
        assert_eq!(h["access-control-allow-origin"], "https://a.org");
        assert_eq!(h["access-control-allow-methods"], "GET, PUT");
        assert_eq!(h["access-control-allow-headers"], "x-amz-date");
        assert_eq!(h["access-control-max-age"], "600");
        assert_eq!(h["access-control-expose-headers"], "ETag");
        assert!(headers(&own, "https://a.org", None).get("access-control-max-age").is_none());
    }

    #[test]
    fn configurations_s3_refuses_are_refused() {
        assert!(check(&[rule(&["*"], &["GET"], &[])]).is_ok());
        assert!(check(&[]).is_err());
        assert!(check(&[rule(&["*"], &["PATCH"], &[])]).is_err());
        assert!(check(&[rule(&["https://*.*.org"], &["GET"], &[])]).is_err());
        assert!(check(&vec![rule(&["*"], &["GET"], &[]); MAX_RULES + 1]).is_err());
        assert_eq!(bucket_of("/bk/a/b"), Some("bk"));
        assert_eq!(bucket_of("/"), None);
    }
}
