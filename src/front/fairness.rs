//! Fairness between the MCP front's clients: who "a client" is (its address and declared
//! `clientInfo.name`), and its long-lived streams (listen, `GET`), the stalest ended past a limit.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

pub use crate::config::Fairness as Limits;

/// The most of a declared `clientInfo.name` a client's key keeps.
const MAX_NAME: usize = 64;

/// One client of the front: a peer address (`stdio` for the stdio harness) and the name it
/// declares in `clientInfo`. Every local process shares `127.0.0.1`, so the name tells a
/// well-behaved client's sessions and streams from another's; a hostile one can claim any
/// name, which is why every per-client limit has a total beside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Client(String);

impl Client {
    /// The client at `peer` (`None`: the stdio harness) declaring `name`.
    pub fn new(peer: Option<IpAddr>, name: Option<&str>) -> Self {
        let peer = peer.map_or_else(|| "stdio".to_string(), |ip| ip.to_string());
        let name: String = name.unwrap_or_default().chars().take(MAX_NAME).collect();
        Self(format!("{peer} {name:?}"))
    }

    /// How logs name it: the address, then the declared name quoted (escaped).
    pub fn describe(&self) -> &str {
        &self.0
    }
}

/// One open listen stream.
struct Entry {
    id: u64,
    client: Client,
    /// When it opened or last delivered something.
    last: Instant,
    end: CancellationToken,
}

/// The open long-lived streams (listen and `GET`) of every client.
#[derive(Default)]
pub struct Listens {
    entries: Mutex<Vec<Entry>>,
    next: AtomicU64,
}

impl Listens {
    /// Admit a listen stream of `client`, ending (through their tickets) the streams that
    /// must end for it to fit: past `per_client`, the client's own longest idle one; past
    /// `total`, the longest idle one of the client holding the most.
    pub fn admit(self: &Arc<Self>, client: Client, per_client: usize, total: usize) -> Ticket {
        let mut ended = Vec::new();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let end = CancellationToken::new();
        {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                let own = entries.iter().filter(|e| e.client == client).count();
                let victim = if own >= per_client {
                    stalest(&entries, |e| e.client == client)
                } else if entries.len() >= total {
                    let greediest = greediest(&entries);
                    stalest(&entries, |e| Some(&e.client) == greediest.as_ref())
                } else {
                    break;
                };
                match victim {
                    Some(at) => ended.push(entries.swap_remove(at)),
                    None => break,
                }
            }
            entries.push(Entry {
                id,
                client: client.clone(),
                last: Instant::now(),
                end: end.clone(),
            });
        }
        for entry in ended {
            tracing::info!(
                client = entry.client.describe(),
                for_client = client.describe(),
                "a listen stream was ended to make room for another ([mcp] max_listen_streams, max_listen_streams_per_client)"
            );
            entry.end.cancel();
        }
        Ticket {
            listens: self.clone(),
            id,
            end,
        }
    }

    /// How many listen streams are open.
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// The index of the entry matching `which` that delivered nothing for the longest.
fn stalest(entries: &[Entry], which: impl Fn(&Entry) -> bool) -> Option<usize> {
    (entries.iter().enumerate())
        .filter(|(_, e)| which(e))
        .min_by_key(|(_, e)| e.last)
        .map(|(at, _)| at)
}

/// The client holding the most entries (of two holding as many, the one whose stalest is
/// older).
fn greediest(entries: &[Entry]) -> Option<Client> {
    let held = |client: &Client| entries.iter().filter(|e| &e.client == client).count();
    (entries.iter())
        .max_by(|a, b| (held(&a.client).cmp(&held(&b.client))).then_with(|| b.last.cmp(&a.last)))
        .map(|e| e.client.clone())
}

/// A listen stream's place among the open ones: `end` is cancelled when another stream
/// needs it; dropping it frees the place.
pub struct Ticket {
    listens: Arc<Listens>,
    id: u64,
    /// Cancelled when the stream must end to make room for another.
    pub end: CancellationToken,
}

impl Ticket {
    /// The stream delivered something: it is not idle.
    pub fn delivered(&self) {
        let mut entries = (self.listens.entries.lock()).unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = entries.iter_mut().find(|e| e.id == self.id) {
            entry.last = Instant::now();
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut entries = (self.listens.entries.lock()).unwrap_or_else(|p| p.into_inner());
        entries.retain(|e| e.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str) -> Client {
        Client::new(Some([127, 0, 0, 1].into()), Some(name))
    }

    #[test]
    fn a_client_past_its_limit_loses_its_own_stalest_stream() {
        let listens = Arc::new(Listens::default());
        let first = listens.admit(client("greedy"), 2, 10);
        let other = listens.admit(client("other"), 2, 10);
        let second = listens.admit(client("greedy"), 2, 10);
        second.delivered();
        std::thread::sleep(std::time::Duration::from_millis(2));
        first.delivered();
        let third = listens.admit(client("greedy"), 2, 10);
        assert!(second.end.is_cancelled(), "the stalest of its own");
        assert!(!first.end.is_cancelled() && !other.end.is_cancelled());
        assert!(!third.end.is_cancelled());
        assert_eq!(listens.count(), 3);
        drop(third);
        assert_eq!(listens.count(), 2);
    }

    #[test]
    fn past_the_total_the_client_holding_the_most_gives_one_up() {
        let listens = Arc::new(Listens::default());
        let quiet = listens.admit(client("quiet"), 8, 3);
        let a = listens.admit(client("busy"), 8, 3);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = listens.admit(client("busy"), 8, 3);
        let newcomer = listens.admit(client("new"), 8, 3);
        assert!(a.end.is_cancelled(), "the busy client's stalest");
        assert!(!quiet.end.is_cancelled() && !b.end.is_cancelled());
        assert!(!newcomer.end.is_cancelled());
        assert_eq!(listens.count(), 3);
    }

    #[test]
    fn a_client_is_its_address_and_declared_name() {
        assert_eq!(client("x"), client("x"));
        assert_ne!(client("x"), client("y"));
        assert_ne!(
            client("x"),
            Client::new(Some([10, 0, 0, 1].into()), Some("x"))
        );
        let long = "n".repeat(1000);
        assert!(client(&long).describe().len() < 100);
        assert_eq!(Client::new(None, None).describe(), "stdio \"\"");
    }
}
