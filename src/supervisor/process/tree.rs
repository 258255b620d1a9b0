//! The process table as `/proc` shows it: each process's parent and whether it is a zombie,
//! what lies below a process, and whether a process's environment carries a variable.
//! Parsing is pure; `snapshot` and `environment_has` read `/proc`.

use std::collections::HashSet;

/// One process: its id, its parent's, and whether it has exited (a zombie waiting for its
/// parent to reap it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    /// Process id.
    pub pid: i32,
    /// Parent process id.
    pub ppid: i32,
    /// Exited and not yet reaped.
    pub zombie: bool,
}

/// `(ppid, zombie)` from the text of `/proc/<pid>/stat`. The command name in parentheses
/// may itself hold spaces and parentheses: the fields start after the last `)`.
pub fn parse_stat(text: &str) -> Option<(i32, bool)> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state == "Z" || state == "X"))
}

/// `(start time in clock ticks since boot, number of threads)` from the text of a process's
/// own `/proc/<pid>/stat` (fields 22 and 20).
pub fn parse_start_and_threads(text: &str) -> Option<(u64, u64)> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(17);
    let threads = fields.next()?.parse().ok()?;
    let start = fields.nth(1)?.parse().ok()?;
    Some((start, threads))
}

/// This process, uniquely: `<pid>.<start time in clock ticks>` (so a reused pid makes
/// another token), and its number of threads now (`None` where `/proc` cannot say).
pub fn own_token_and_threads() -> (String, Option<u64>) {
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let parsed = stat.as_deref().and_then(parse_start_and_threads);
    let start = parsed.map_or(0, |(start, _)| start);
    (
        format!("{}.{start}", std::process::id()),
        parsed.map(|(_, threads)| threads),
    )
}

/// Every process now (those that vanish while being read are left out).
pub fn snapshot() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (ppid, zombie) = parse_stat(&text)?;
            Some(Proc { pid, ppid, zombie })
        })
        .collect()
}

/// Every live process below `root` by parent links (children, grandchildren, …; not `root`).
pub fn below(procs: &[Proc], root: i32) -> Vec<i32> {
    let mut found = vec![root];
    let mut seen: HashSet<i32> = HashSet::from([root]);
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for p in procs {
            if p.ppid == parent && seen.insert(p.pid) {
                found.push(p.pid);
            }
        }
        i += 1;
    }
    found.remove(0);
    found.retain(|pid| procs.iter().any(|p| p.pid == *pid && !p.zombie));
    found
}

/// Whether an environment block (`NAME=value` entries separated by NUL bytes) holds an
/// entry that is exactly `entry`, or starts with it when `prefix`.
pub fn block_has(block: &[u8], entry: &[u8], prefix: bool) -> bool {
    block.split(|b| *b == 0).any(|var| {
        if prefix {
            var.starts_with(entry)
        } else {
            var == entry
        }
    })
}

/// Whether process `pid` was started with `entry` in its environment (see [`block_has`]);
/// false when it is gone or not ours to read.
pub fn environment_has(pid: i32, entry: &[u8], prefix: bool) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|block| block_has(&block, entry, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(
            parse_stat("42 (sleep) S 7 42 42 0 -1 4194304 ..."),
            Some((7, false))
        );
        assert_eq!(parse_stat("43 (a (b) c) Z 1 43 43 0 -1"), Some((1, true)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn own_stat_gives_start_time_and_threads() {
        // A real line (fields 20 and 22: 3 threads, started at tick 2419836), with a command
        // name that holds ") " itself.
        let line = "6653 (ahp) R (x) R 6650 6649 32667 0 -1 4194304 480 0 3 0 0 0 0 0 20 0 3 0 \
                    2419836 1103577088 2244 18446744073709551615";
        assert_eq!(parse_start_and_threads(line), Some((2419836, 3)));
        assert_eq!(parse_start_and_threads("6653 (ahp) R 6650"), None);
        // This test's own process: a thread or more, a token of the form pid.ticks.
        let (token, threads) = own_token_and_threads();
        assert!(threads.is_some_and(|n| n >= 1), "{threads:?}");
        assert!(
            token.starts_with(&format!("{}.", std::process::id())),
            "{token}"
        );
        assert!(!token.ends_with(".0"), "{token}");
    }

    #[test]
    fn below_follows_parent_links_and_skips_zombies() {
        let p = |pid, ppid, zombie| Proc { pid, ppid, zombie };
        let procs = [
            p(1, 0, false),
            p(10, 1, false),
            p(11, 10, false),
            p(12, 11, true),
            p(13, 12, false),
            p(20, 1, false),
        ];
        let mut found = below(&procs, 10);
        found.sort();
        assert_eq!(found, [11, 13]);
        assert!(below(&procs, 20).is_empty());
    }

    #[test]
    fn environment_entries_match_whole_or_by_prefix() {
        let block = b"PATH=/bin\0AHP_PROXY_OWNER=12.34/5\0HOME=/root\0";
        assert!(block_has(block, b"AHP_PROXY_OWNER=12.34/5", false));
        assert!(!block_has(block, b"AHP_PROXY_OWNER=12.34/", false));
        assert!(block_has(block, b"AHP_PROXY_OWNER=12.34/", true));
        assert!(!block_has(block, b"AHP_PROXY_OWNER=12.3/", true));
    }
}
