//! The descriptor budget: `RLIMIT_NOFILE`'s soft limit raised to the hard one at start-up,
//! and each listener's connection limit derived from it, so one cannot starve the others.
//!
//! A quarter of the descriptors (at least 128) is kept for everything else (the servers'
//! pipes and connections, files, the watcher); the rest is split evenly between the three
//! listeners (AHP, MCP HTTP, the View origin), each of which holds at most its connections
//! plus refusals in flight (`tcp::Slots::most`).

/// Descriptors kept for everything but the listeners, at least.
const RESERVED: u64 = 128;
/// The listeners that share the rest.
const LISTENERS: u64 = 3;
/// A limit reported as unlimited is taken as this many.
const UNLIMITED: u64 = 1 << 20;

/// The limit in effect after [`raise`], and what it was before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The soft limit at start-up.
    pub was: u64,
    /// The soft limit now.
    pub now: u64,
}

/// Raise the soft `RLIMIT_NOFILE` to the hard one (what a process may do without
/// privileges). `None` when the limit cannot be read.
pub fn raise() -> Option<Limit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given.
    #[allow(unsafe_code)]
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if read != 0 {
        return None;
    }
    let was = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads only the struct it is given.
        #[allow(unsafe_code)]
        let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
        if set == 0 {
            limit.rlim_cur = limit.rlim_max;
        }
    }
    let finite = |n: libc::rlim_t| {
        if n == libc::RLIM_INFINITY {
            UNLIMITED
        } else {
            n
        }
    };
    Some(Limit {
        was: finite(was),
        now: finite(limit.rlim_cur),
    })
}

/// The connections each listener may hold under a descriptor limit of `limit`: at most
/// `configured` (`limits.max_connections`), at least 1.
pub fn connections_per_listener(limit: u64, configured: usize) -> usize {
    let reserved = RESERVED.max(limit / 4);
    let per_listener = limit.saturating_sub(reserved) / LISTENERS;
    // Connections plus refusals in flight (a quarter as many, at least 16) fit in the
    // listener's share.
    let per_listener = usize::try_from(per_listener).unwrap_or(usize::MAX);
    let fits = (per_listener / 5 * 4).min(per_listener.saturating_sub(crate::tcp::MIN_REFUSALS));
    fits.clamp(1, configured.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listeners_share_what_is_left_and_never_take_it_all() {
        // 256: 128 kept, 42 per listener, 26 connections and 16 refusals each.
        assert_eq!(connections_per_listener(256, 256), 26);
        let held = 3 * crate::tcp::Slots::most(26);
        assert!(held as u64 + RESERVED <= 256, "{held}");
        for limit in 0..2000 {
            let each = crate::tcp::Slots::most(connections_per_listener(limit, 100_000)) as u64;
            assert!(
                limit < 200 || 3 * each + RESERVED.max(limit / 4) <= limit,
                "{limit}"
            );
        }
        // A generous limit: the configured one applies.
        assert_eq!(connections_per_listener(1 << 20, 256), 256);
        assert_eq!(connections_per_listener(UNLIMITED, 100_000), 100_000);
        // Nothing left: still one each, so every listener answers someone.
        assert_eq!(connections_per_listener(64, 256), 1);
    }

    #[test]
    fn raising_never_lowers_the_limit() {
        let limit = raise().expect("RLIMIT_NOFILE is readable");
        assert!(limit.now >= limit.was, "{limit:?}");
    }
}
