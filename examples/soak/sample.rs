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

/// Whether `pid` is running (not gone, not a zombie waiting to be reaped).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, rest) = stat.rsplit_once(')')?;
            rest.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

/// `VmRSS` of `pid` in KiB; `None` once the process is gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Open file descriptors of `pid`; `None` once the process is gone.
pub fn fds(pid: u32) -> Option<usize> {
    if !alive(pid) {
        return None;
    }
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| dir.count())
        .ok()
}

/// Live (not zombie) child processes of `pid`.
pub fn children(pid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map(|(_, rest)| rest.split_whitespace().collect())
                    .unwrap_or_default();
                fields.first() != Some(&"Z") && fields.get(1) == Some(&pid.to_string().as_str())
            })
        })
        .count()
}

/// Open descriptors of `pid` read while exactly `servers` children of it are running (a
/// server between two runs has its pipes closed, which would hide as many leaked
/// descriptors): `Err` when the proxy is gone or that moment did not come within `patience`.
pub async fn steady_fds(pid: u32, servers: usize, patience: Duration) -> Result<usize, String> {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let before = children(pid);
        let fds = fds(pid).ok_or("the proxy is gone")?;
        if before == servers && children(pid) == servers {
            return Ok(fds);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "never {servers} servers running at once within {patience:?} (now {before})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A reading of `pid`; `None` once the process is gone.
pub fn take(pid: u32, at: Duration) -> Option<Sample> {
    Some(Sample {
        at,
        rss_kib: rss_kib(pid)?,
        fds: fds(pid)?,
    })
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
