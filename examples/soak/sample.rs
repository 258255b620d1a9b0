//! The proxy process as the soak sees it: resident memory and open file descriptors read
//! from /proc, and a least-squares trend over a series of them.

use std::time::Duration;

/// One reading of the proxy process.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Since the traffic started.
    pub at: Duration,
    pub rss_kib: u64,
    pub fds: usize,
}

/// `VmRSS` of `pid` in KiB (0 once the process is gone).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Open file descriptors of `pid`.
pub fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

pub fn take(pid: u32, at: Duration) -> Sample {
    Sample {
        at,
        rss_kib: rss_kib(pid),
        fds: fds(pid),
    }
}

/// Slope of `value` over time in units per minute (least squares).
pub fn trend_per_minute(samples: &[Sample], value: impl Fn(&Sample) -> f64) -> f64 {
    let n = samples.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let xs: Vec<f64> = samples.iter().map(|s| s.at.as_secs_f64() / 60.0).collect();
    let ys: Vec<f64> = samples.iter().map(value).collect();
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let num: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}
