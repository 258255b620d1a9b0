//! The AHP watcher (`BENCH_FRONT_AHP_WATCHER`): an official AHP client following the
//! default session of an `ahp-proxy serve` (and, asked, its chats), as an IDE would.

/// What the AHP watcher's readers tell it.
enum Seen {
    /// An event on the session; a chat to follow when it announced one.
    Session(Option<String>),
    /// An event on a followed chat.
    Chat,
    /// The session's subscription ended (the proxy is gone).
    End,
}

/// Follow the default session of the AHP endpoint at `url` with the official client, and
/// with `chats` its chats (the mirrored tool calls) as they appear, as an IDE showing them
/// would; read every event until the proxy goes away.
pub async fn watch_ahp(url: String, chats: bool, paths: String) {
    use ahp::client::{SessionSubscription, SubscriptionEvent};
    use ahp_types::actions::StateAction;
    use ahp_types::state::SnapshotState;
    use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

    /// Forward one subscription's events as `seen`, then (for the session) `End`.
    fn read(mut from: SessionSubscription, to: UnboundedSender<Seen>, session: bool) {
        tokio::spawn(async move {
            while let Some(event) = from.recv().await {
                let seen = if !session {
                    Seen::Chat
                } else if let SubscriptionEvent::Action(envelope) = event {
                    match envelope.action {
                        StateAction::SessionChatAdded(added) => {
                            Seen::Session(Some(added.summary.resource))
                        }
                        _ => Seen::Session(None),
                    }
                } else {
                    Seen::Session(None)
                };
                if to.send(seen).is_err() {
                    return;
                }
            }
            if session {
                let _ = to.send(Seen::End);
            }
        });
    }

    let Ok(transport) = ahp_ws::WebSocketTransport::connect(&url).await else {
        eprintln!("bench_front: the AHP watcher could not connect to {url}");
        return;
    };
    let Ok(client) =
        ahp::client::Client::connect(transport, ahp::client::ClientConfig::default()).await
    else {
        return;
    };
    if client
        .initialize("bench-watcher".into(), vec!["1.0.0".into()], vec![])
        .await
        .is_err()
    {
        return;
    }
    let Ok((first, session)) = client.subscribe("ahp-proxy:/default".into()).await else {
        eprintln!("bench_front: the AHP watcher could not subscribe");
        return;
    };
    let (tx, mut seen) = unbounded_channel();
    let mut to_follow: Vec<String> = match first.snapshot.map(|s| s.state) {
        Some(SnapshotState::Session(state)) if chats => {
            state.chats.iter().map(|c| c.resource.clone()).collect()
        }
        _ => Vec::new(),
    };
    read(session, tx.clone(), true);
    let since = std::time::Instant::now();
    let (mut on_session, mut on_chats) = (0u64, 0u64);
    let mut followed = std::collections::HashSet::new();
    loop {
        for chat in to_follow.drain(..) {
            if !followed.insert(chat.clone()) {
                continue;
            }
            match client.subscribe(chat).await {
                Ok((_, subscription)) => read(subscription, tx.clone(), false),
                Err(_) => eprintln!("bench_front: the AHP watcher could not follow a chat"),
            }
        }
        match seen.recv().await {
            Some(Seen::Session(chat)) => {
                on_session += 1;
                to_follow.extend(chat.filter(|_| chats));
            }
            Some(Seen::Chat) => on_chats += 1,
            Some(Seen::End) | None => break,
        }
    }
    eprintln!(
        "bench_front: the AHP watcher at {url} ({paths}) read {on_session} session and \
         {on_chats} chat events ({} chats) in {:.1} s",
        followed.len(),
        since.elapsed().as_secs_f64()
    );
}
