//! Result files of the bench lab: written whole or not at all, so an interrupted run never
//! leaves half a JSON file for a report to choke on.

use crate::client_cmds::CmdResult;

/// Writes `value` as JSON to `path` through a temporary file and a rename.
pub(crate) fn write_atomically(path: &std::path::Path, value: &impl serde::Serialize) -> CmdResult {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(value)?).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}
