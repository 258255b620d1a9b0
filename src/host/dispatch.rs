//! Client-dispatched actions: admitted against current state, committed through the store,
//! and carried out (toggles mirrored to every session, start/stop to the supervisor, give-ups).

use ahp_types::actions::{ActionEnvelope, ActionOrigin, StateAction};
use ahp_types::commands::DispatchActionParams;
use ahp_types::ROOT_RESOURCE_URI;

use super::audience::Named;
use super::fanout::ConnId;
use super::store::CommitError;
use super::{admission, bounds, live, Core, Host};
use crate::jsonrpc;
use crate::untrusted::Untrusted;

impl Host {
    /// Handle `dispatchAction` from `client_id` on `channel` (the host's URI, and the name the
    /// client used): unknown channels are ignored; refused actions are echoed to the sender
    /// only, by the name it used, with `rejectionReason`, and not applied; accepted ones are
    /// reduced, sequenced and broadcast with the client's `origin`.
    pub fn dispatch(
        &self,
        id: ConnId,
        client_id: &str,
        mut params: DispatchActionParams,
        channel: &Named,
    ) {
        params.channel = channel.uri.clone();
        let mut core = self.core();
        let core = &mut *core;
        let may_decide = core.fanout.may_decide(id);
        let verdict = if params.channel == ROOT_RESOURCE_URI {
            admission::admit_root(core.store.root(), &params.action)
        } else if let Some(session) = core.store.session(&params.channel) {
            admission::admit_session(&params.channel, session, client_id, &params.action)
        } else if let Some(refused) =
            core.judge_approval(&params.channel, &params.action, may_decide)
        {
            refused
        } else if let Some(chat) = core.store.chat(&params.channel) {
            admission::admit_chat(chat, client_id, &params.action).and_then(|admission| {
                match &params.action {
                    StateAction::ChatToolCallComplete(a)
                        if admission == admission::ChatAdmission::GiveUp
                            && !core.paused.is_held(&params.channel, &a.tool_call_id) =>
                    {
                        Err(admission::Refusal::rule(format!(
                            "tool call {:?} is no longer waiting for authorization",
                            a.tool_call_id
                        )))
                    }
                    _ => Ok(()),
                }
            })
        } else {
            tracing::debug!(conn = id, channel = %Untrusted(&params.channel), "dispatchAction on an unknown channel ignored");
            return;
        };
        // Whatever the channel, nothing oversized is kept.
        let verdict = verdict.and_then(|()| Ok(bounds::action(&params.action)?));
        let origin = ActionOrigin {
            client_id: client_id.to_string(),
            client_seq: params.client_seq,
        };
        let refusal = match verdict {
            Ok(()) => {
                let action = core.resolve(&params.channel, params.action.clone());
                match core.commit_and_publish(&params.channel, action, Some(origin.clone())) {
                    Ok(_) => {
                        match &params.action {
                            StateAction::ChatToolCallConfirmed(a)
                                if core.approvals.is_held(&params.channel, &a.tool_call_id) =>
                            {
                                return core.client_decided(&params.channel, client_id, a);
                            }
                            StateAction::ChatToolCallResultConfirmed(a)
                                if core.approvals.is_held(&params.channel, &a.tool_call_id) =>
                            {
                                return core.client_reviewed(&params.channel, client_id, a);
                            }
                            _ => {}
                        }
                        core.carry_out(&params.channel, &params.action);
                        return;
                    }
                    Err(CommitError::Refused(reason)) => reason,
                    Err(CommitError::UnknownChannel) => return,
                }
            }
            Err(refusal) => refusal.to_string(),
        };
        params.channel = channel.name.clone();
        core.refuse(id, params, origin, refusal);
    }

    /// Refuse `dispatchAction` from `client_id` without judging the action (its
    /// `clientSeq` is out of order): echoed to the sender only, with `reason`.
    pub fn refuse(
        &self,
        id: ConnId,
        client_id: &str,
        params: DispatchActionParams,
        reason: String,
    ) {
        let origin = ActionOrigin {
            client_id: client_id.to_string(),
            client_seq: params.client_seq,
        };
        self.core().refuse(id, params, origin, reason);
    }
}

impl Core {
    /// Echo a refused action to its sender only, with `rejectionReason` and the current
    /// `serverSeq` (not a new one: nothing was applied).
    fn refuse(
        &mut self,
        id: ConnId,
        params: DispatchActionParams,
        origin: ActionOrigin,
        reason: String,
    ) {
        tracing::debug!(conn = id, channel = %Untrusted(&params.channel), reason = %Untrusted(&reason), "client action rejected");
        let echo = ActionEnvelope {
            channel: params.channel,
            action: params.action,
            server_seq: self.store.seq(),
            origin: Some(origin),
            rejection_reason: Some(reason),
        };
        self.send(id, jsonrpc::notification("action", &echo));
    }

    /// An admitted client action as the host commits it: a toggle carries the decisions
    /// the host holds beside the client's (see [`live::Live::resolve`]).
    fn resolve(&self, channel: &str, mut action: StateAction) -> StateAction {
        if let StateAction::ChatToolCallConfirmed(a) = &mut action {
            // A client's approval of a held call is the user's.
            if a.approved
                && a.confirmed.is_none()
                && self.approvals.is_held(channel, &a.tool_call_id)
            {
                a.confirmed = Some(ahp_types::state::ToolCallConfirmationReason::UserAction);
            }
        }
        if let StateAction::SessionCustomizationToggled(a) = &mut action {
            if self.store.session(channel).is_some() {
                a.enablement = self.live.resolve(&a.id, &a.enablement);
            }
        }
        action
    }

    /// Side effects of an accepted client action (as the client sent it): toggles are
    /// remembered (and mirrored to the other sessions, since servers are shared); toggles
    /// and start/stop are asked of the supervisor.
    fn carry_out(&mut self, channel: &str, action: &StateAction) {
        use crate::supervisor::Request;
        let request = match action {
            StateAction::SessionCustomizationToggled(a) => {
                self.live.record_toggle(&a.id, &a.enablement);
                let others: Vec<String> = self
                    .store
                    .session_uris()
                    .filter(|uri| *uri != channel)
                    .map(str::to_string)
                    .collect();
                for uri in others {
                    // A session that does not show it takes it as a no-op.
                    let action = self.resolve(&uri, action.clone());
                    let _ = self.commit_and_publish(&uri, action, None);
                }
                Request::Toggle {
                    id: a.id.clone(),
                    enabled: live::effective(&a.enablement),
                }
            }
            StateAction::SessionMcpServerStartRequested(a) => Request::Run {
                id: a.id.clone(),
                run: true,
            },
            StateAction::SessionMcpServerStopRequested(a) => Request::Run {
                id: a.id.clone(),
                run: false,
            },
            StateAction::ChatToolCallComplete(a) => {
                // A client gave up on a call waiting for authorization: its harness request
                // ends with an error now.
                self.paused.give_up(channel, &a.tool_call_id);
                return;
            }
            _ => return,
        };
        self.ask(request);
    }
}
