#include "daemon/dispatch.h"

#include "daemon/action_frames.h"
#include "daemon/log.h"

namespace nvshare::daemon {

void dispatch_actions(Scheduler& scheduler, EventLog& events, const Connections& connections)
{
    for (const Action& a : scheduler.take_actions()) {
        const auto it = connections.find(a.client);
        Connection* c = it == connections.end() ? nullptr : it->second.get();
        const ClientRecord* client = scheduler.client(a.client);
        if (c == nullptr || client == nullptr)
            continue;
        const uint64_t local = client->to_local(a.gpus);
        const uint32_t flags = (a.exclusive ? proto::kGrantExclusive : 0u) |
                               (a.contended ? proto::kGrantContended : 0u) |
                               (a.oversubscribed ? proto::kGrantOversubscribed : 0u);
        switch (a.kind) {
            case ActionKind::Grant: {
                // Its hold ended in the same batch (the client's own
                // Released came after its Request): nothing to grant now.
                if (client->phase != Phase::Holding || (client->held & a.gpus) != a.gpus)
                    break;
                const proto::GrantPayload p{local, flags | (a.bounded ? proto::kGrantBounded : 0u),
                                            a.contended ? proto::keep_to_wire(a.keep) : 0};
                const bool waited_long = events.not_waiting(a.client);
                const EventSubject who = event_subject(scheduler, *client, a.gpus);
                events.emit(EventKind::Granted, LogLevel::Info, &who,
                            {{"exclusive", a.exclusive ? "1" : "0"}}, "granted %s%s%s",
                            who.gpu_uuids.empty() ? "?" : who.gpu_uuids[0].c_str(),
                            a.exclusive ? ", exclusively" : ", shared",
                            waited_long ? " after a long wait" : "");
                c->send(proto::MsgType::Grant, p);
                break;
            }
            case ActionKind::Drop: {
                const uint64_t grace_us = to_usec(a.grace);
                const proto::DropPayload p{local, grace_us,
                                           (flags & proto::kGrantOversubscribed) |
                                               (a.turns_begin ? proto::kDropTurnsBegin : 0u),
                                           proto::keep_to_wire(a.keep)};
                const EventSubject who = event_subject(scheduler, *client, a.gpus);
                events.emit(EventKind::Drop, LogLevel::Info, &who,
                            {{"grace_us", std::to_string(grace_us)}},
                            "asked to release %s within %.1f s: others wait",
                            who.gpu_uuids.empty() ? "?" : who.gpu_uuids[0].c_str(),
                            static_cast<double>(grace_us) / 1e6);
                c->send(proto::MsgType::Drop, p);
                break;
            }
            case ActionKind::Revoke: {
                const bool admin = a.revoke_reason == RevokeReason::Admin;
                const EventSubject who = event_subject(scheduler, *client, a.gpus);
                events.emit(EventKind::Revoked, LogLevel::Info, &who,
                            {{"cause", admin ? "admin" : "grace-expired"}},
                            "revoked the lock on %s: %s",
                            who.gpu_uuids.empty() ? "?" : who.gpu_uuids[0].c_str(),
                            admin ? "an administrator revoked it"
                                  : "it did not release within the grace period");
                const proto::RevokeCausePayload why{
                    local,
                    static_cast<uint32_t>(admin ? proto::RevokeCauseCode::Admin
                                                : proto::RevokeCauseCode::GraceExpired),
                    0};
                c->send(proto::MsgType::RevokeCause, why);
                const proto::GpuMaskPayload p{local};
                c->send(proto::MsgType::Revoked, p);
                break;
            }
            case ActionKind::Waiting:
                c->send(proto::MsgType::Waiting,
                        waiting_payload(*client, a,
                                        a.wait.holder ? scheduler.client(*a.wait.holder) : nullptr,
                                        Clock::now()));
                break;
            case ActionKind::Contended: {
                const proto::GrantPayload p{local, flags, proto::keep_to_wire(a.keep)};
                c->send(proto::MsgType::Contended, p);
                break;
            }
            case ActionKind::RunAhead: {
                const proto::RunAheadPayload p{local, a.bounded ? proto::kRunAheadBounded : 0u, 0};
                NVS_DEBUG("client %llu: %s", static_cast<unsigned long long>(a.client),
                          a.bounded ? "keeps its queued work short (a higher class is here)"
                                    : "may queue work freely again");
                c->send(proto::MsgType::RunAhead, p);
                break;
            }
            case ActionKind::Shrink: {
                const proto::GrantPayload p{local, proto::kGrantOversubscribed,
                                            proto::keep_to_wire(a.keep)};
                NVS_DEBUG("client %llu: asked to leave at most %llu MiB on GPUs it does not hold",
                          static_cast<unsigned long long>(a.client),
                          static_cast<unsigned long long>(a.keep >> 20));
                c->send(proto::MsgType::Shrink, p);
                break;
            }
            case ActionKind::Unpageable: {
                const proto::UnpageablePayload p{local_index(*client, a.gpus), 0, a.others_pinned};
                c->send(proto::MsgType::Unpageable, p);
                break;
            }
        }
    }
}

}  // namespace nvshare::daemon
