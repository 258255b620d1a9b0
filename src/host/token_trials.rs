//! `authenticate` answered once its token was tried: every server it went to reconnected and
//! either came up with it or refused it. Pure bookkeeping over the servers' reported states.
//!
//! A server given a token reconnects, so it reports `starting` first; anything it reported
//! before that (a state already on its way when the token came) says nothing of the token.

use std::collections::HashMap;

use tokio::sync::oneshot;

use crate::supervisor::Status;

/// How a token fared.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// No server refused it: each came up with it, failed for another reason, or went.
    Taken,
    /// A server refused it: the state it asks for authorization with.
    Refused(Box<Status>),
}

/// One `authenticate` waiting: each server with whether it reconnected yet.
struct Trial {
    servers: HashMap<String, bool>,
    reply: oneshot::Sender<Verdict>,
}

/// Every `authenticate` waiting for its token to be tried.
#[derive(Default)]
pub struct TokenTrials {
    trials: Vec<Trial>,
}

impl TokenTrials {
    /// A token went to `servers`: its verdict arrives on the receiver.
    pub fn begin(
        &mut self,
        servers: impl IntoIterator<Item = String>,
    ) -> oneshot::Receiver<Verdict> {
        let (reply, verdict) = oneshot::channel();
        let servers: HashMap<String, bool> = servers.into_iter().map(|id| (id, false)).collect();
        if servers.is_empty() {
            let _ = reply.send(Verdict::Taken);
        } else {
            self.trials.push(Trial { servers, reply });
        }
        verdict
    }

    /// Server `id` reported `status` (`None`: it is gone).
    pub fn observe(&mut self, id: &str, status: Option<&Status>) {
        let mut refused = Vec::new();
        for (at, trial) in self.trials.iter_mut().enumerate() {
            let Some(reconnected) = trial.servers.get_mut(id) else {
                continue;
            };
            match status {
                None => {
                    trial.servers.remove(id);
                }
                Some(Status::Starting { .. }) => *reconnected = true,
                Some(_) if !*reconnected => {}
                Some(status @ Status::AuthRequired { .. }) => refused.push((at, status.clone())),
                Some(_) => {
                    trial.servers.remove(id);
                }
            }
        }
        for (at, status) in refused.into_iter().rev() {
            let trial = self.trials.swap_remove(at);
            let _ = trial.reply.send(Verdict::Refused(Box::new(status)));
        }
        let (done, waiting): (Vec<Trial>, Vec<Trial>) = std::mem::take(&mut self.trials)
            .into_iter()
            .partition(|t| t.servers.is_empty() || t.reply.is_closed());
        self.trials = waiting;
        for trial in done {
            let _ = trial.reply.send(Verdict::Taken);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::{AuthReason, Served};

    fn refused() -> Status {
        Status::AuthRequired {
            resource: "http://h/mcp".into(),
            challenge: None,
            reason: AuthReason::Expired,
            metadata: None,
        }
    }

    fn ready() -> Status {
        Status::Ready {
            tools: 1,
            served: Served::default(),
            icons: None,
        }
    }

    #[test]
    fn a_token_is_taken_once_every_server_came_up_after_reconnecting() {
        let mut trials = TokenTrials::default();
        let mut verdict = trials.begin(["a".to_string(), "b".to_string()]);
        // What `a` said before it reconnected is not about the token.
        trials.observe("a", Some(&refused()));
        trials.observe("a", Some(&Status::Starting { slow: false }));
        trials.observe("a", Some(&ready()));
        assert!(verdict.try_recv().is_err());
        trials.observe("b", Some(&Status::Starting { slow: false }));
        trials.observe("c", Some(&refused()));
        trials.observe("b", Some(&ready()));
        assert_eq!(verdict.try_recv(), Ok(Verdict::Taken));
    }

    #[test]
    fn a_server_refusing_it_refuses_the_token() {
        let mut trials = TokenTrials::default();
        let mut verdict = trials.begin(["a".to_string(), "b".to_string()]);
        trials.observe("a", Some(&Status::Starting { slow: false }));
        trials.observe("a", Some(&refused()));
        assert_eq!(
            verdict.try_recv(),
            Ok(Verdict::Refused(Box::new(refused())))
        );
    }

    #[test]
    fn servers_that_go_or_fail_otherwise_do_not_refuse_it() {
        let mut trials = TokenTrials::default();
        let mut verdict = trials.begin(["a".to_string(), "b".to_string()]);
        trials.observe("a", None);
        trials.observe("b", Some(&Status::Starting { slow: false }));
        trials.observe(
            "b",
            Some(&Status::Error(crate::supervisor::Failure::Exited(
                "x".into(),
            ))),
        );
        assert_eq!(verdict.try_recv(), Ok(Verdict::Taken));
        assert_eq!(trials.begin([]).try_recv(), Ok(Verdict::Taken));
        // A trial nobody waits for any more is dropped.
        drop(trials.begin(["z".to_string()]));
        trials.observe("y", None);
        assert!(trials.trials.is_empty());
    }
}
