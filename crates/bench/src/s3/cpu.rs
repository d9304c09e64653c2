//! CPU seconds of processes, from /proc/PID/stat: the server's cost over the timed phase.

/// CPU seconds (user + system) process `pid` has used, from /proc/PID/stat.
pub fn process_cpu_seconds(pid: u32) -> Result<f64, String> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    // SAFETY: sysconf has no preconditions; _SC_CLK_TCK is a valid name.
    #[allow(unsafe_code, reason = "sysconf(3) has no safe wrapper in std")]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    cpu_seconds_of_stat(&text, ticks as f64).ok_or_else(|| format!("{path}: unexpected format"))
}

/// utime + stime of a /proc/PID/stat line, in seconds at `ticks_per_second`. The command
/// name (field 2) is in parentheses and may hold spaces and parentheses itself, so fields are
/// counted from the last ')'.
pub fn cpu_seconds_of_stat(stat: &str, ticks_per_second: f64) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    (ticks_per_second > 0.0).then(|| (utime + stime) as f64 / ticks_per_second)
}

/// CPU seconds of each of `pids`, in their order.
pub(super) fn servers_cpu(pids: &[u32]) -> Result<Vec<f64>, String> {
    pids.iter().map(|p| process_cpu_seconds(*p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_fields_are_counted_from_the_last_parenthesis() {
        // A command name with a space and a parenthesis, as /proc shows it.
        let line = "1234 (tokio (rt) w) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 100 1000000 500 18446744073709551615";
        assert_eq!(cpu_seconds_of_stat(line, 100.0), Some(3.25));
        assert_eq!(cpu_seconds_of_stat("garbage", 100.0), None);
        assert_eq!(cpu_seconds_of_stat(line, 0.0), None);
        // This process exists and has used some CPU.
        assert!(process_cpu_seconds(std::process::id()).unwrap() >= 0.0);
        assert!(process_cpu_seconds(u32::MAX).is_err());
    }
}
