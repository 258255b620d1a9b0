//! Harness tool calls paused for authorization, and the one rule that ends each of them: the
//! call resuming (`release`) and a client giving up (`give_up`) race, and only the first counts.
//!
//! Pure bookkeeping plus the give-up broadcast; the host keeps it under its one lock, so the
//! check that admits a client's give-up and the commit that follows cannot be split by a resume.

use std::collections::HashSet;

use tokio::sync::broadcast;

/// How many give-ups a listener may fall behind before it misses some.
const GIVE_UP_BACKLOG: usize = 64;

/// The calls (chat URI, tool call id) whose harness request waits for authorization right
/// now, and the announcement of every give-up.
pub struct PausedCalls {
    held: HashSet<(String, String)>,
    /// Calls shown to clients as waiting, with a session input-needed entry.
    announced: HashSet<(String, String)>,
    given_up: broadcast::Sender<(String, String)>,
}

impl Default for PausedCalls {
    fn default() -> Self {
        Self {
            held: HashSet::new(),
            announced: HashSet::new(),
            given_up: broadcast::channel(GIVE_UP_BACKLOG).0,
        }
    }
}

impl PausedCalls {
    /// Call `call` of `chat` waits for authorization: from now on a client may give up on it.
    pub fn hold(&mut self, chat: &str, call: &str) {
        self.held.insert((chat.to_string(), call.to_string()));
    }

    /// Call `call` of `chat` resumes. `false` when it was not held (a client gave up first).
    pub fn release(&mut self, chat: &str, call: &str) -> bool {
        self.held.remove(&(chat.to_string(), call.to_string()))
    }

    /// Whether call `call` of `chat` is held, so a client may give up on it.
    pub fn is_held(&self, chat: &str, call: &str) -> bool {
        self.held.contains(&(chat.to_string(), call.to_string()))
    }

    /// A client gives up on call `call` of `chat`: if it is still held, it is taken out and
    /// the give-up announced. `false` when it was not held (it already resumed or ended).
    pub fn give_up(&mut self, chat: &str, call: &str) -> bool {
        let key = (chat.to_string(), call.to_string());
        if !self.held.remove(&key) {
            return false;
        }
        let _ = self.given_up.send(key);
        true
    }

    /// Call `call` of `chat` is shown as waiting (its input-needed entry is raised).
    pub fn announce(&mut self, chat: &str, call: &str) {
        self.announced.insert((chat.to_string(), call.to_string()));
    }

    /// Call `call` of `chat` no longer waits. `true` when it was shown as waiting (its
    /// input-needed entry must be lifted).
    pub fn withdraw(&mut self, chat: &str, call: &str) -> bool {
        self.announced.remove(&(chat.to_string(), call.to_string()))
    }

    /// Every give-up (chat URI, tool call id) from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<(String, String)> {
        self.given_up.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announced_call_is_withdrawn_once() {
        let mut paused = PausedCalls::default();
        assert!(!paused.withdraw("chat", "call-1"));
        paused.announce("chat", "call-1");
        assert!(paused.withdraw("chat", "call-1"));
        assert!(!paused.withdraw("chat", "call-1"));
    }

    #[test]
    fn a_resumed_call_can_no_longer_be_given_up() {
        let mut paused = PausedCalls::default();
        let mut heard = paused.subscribe();
        paused.hold("chat", "call-1");
        assert!(paused.is_held("chat", "call-1"));
        assert!(paused.release("chat", "call-1"));
        assert!(!paused.is_held("chat", "call-1"));
        assert!(!paused.give_up("chat", "call-1"));
        assert!(heard.try_recv().is_err());
    }

    #[test]
    fn a_given_up_call_is_announced_once_and_can_no_longer_be_released() {
        let mut paused = PausedCalls::default();
        let mut heard = paused.subscribe();
        paused.hold("chat", "call-1");
        assert!(paused.give_up("chat", "call-1"));
        assert_eq!(
            heard.try_recv().unwrap(),
            ("chat".to_string(), "call-1".to_string())
        );
        assert!(!paused.release("chat", "call-1"));
        assert!(!paused.give_up("chat", "call-1"));
        assert!(heard.try_recv().is_err());
    }

    #[test]
    fn calls_are_told_apart_by_chat_and_id() {
        let mut paused = PausedCalls::default();
        let mut heard = paused.subscribe();
        paused.hold("chat-a", "call-1");
        assert!(!paused.is_held("chat-b", "call-1"));
        assert!(!paused.is_held("chat-a", "call-2"));
        assert!(!paused.give_up("chat-b", "call-1"));
        assert!(!paused.release("chat-a", "call-2"));
        assert!(heard.try_recv().is_err());
        assert!(paused.is_held("chat-a", "call-1"));
    }

    #[test]
    fn a_call_that_was_never_held_is_neither_released_nor_given_up() {
        let mut paused = PausedCalls::default();
        let mut heard = paused.subscribe();
        assert!(!paused.release("chat", "call-1"));
        assert!(!paused.give_up("chat", "call-1"));
        assert!(heard.try_recv().is_err());
    }
}
