#include "daemon/bus_authorizer.h"

#include <cmath>

#include "daemon/log.h"

namespace nvshare::daemon {

namespace {

constexpr std::chrono::seconds kBusDriverTimeout{5};

// "2.0 s" for a wait.
std::string seconds_text(CallerLimits::Clock::duration d)
{
    const double s = std::chrono::duration<double>(d).count();
    char text[32];
    snprintf(text, sizeof text, "%.1f s", std::ceil(s * 10.0) / 10.0);
    return text;
}

}  // namespace

BusAuthorizer::BusAuthorizer(sdbus::IConnection& connection)
    : bus_driver_(sdbus::createProxy(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus")),
      polkit_(connection)
{
}

void BusAuthorizer::caller_uid(const std::string& sender, UidAnswer done)
{
    try {
        bus_driver_->callMethodAsync("GetConnectionUnixUser")
            .onInterface("org.freedesktop.DBus")
            .withTimeout(kBusDriverTimeout)
            .withArguments(sender)
            .uponReplyInvoke([done](const sdbus::Error* error, uint32_t uid) {
                if (error != nullptr)
                    done(std::nullopt, error);
                else
                    done(static_cast<uid_t>(uid), nullptr);
            });
    } catch (const sdbus::Error& e) {
        done(std::nullopt, &e);
    }
}

sdbus::Error BusAuthorizer::refusal(uid_t uid, const char* name, const std::string& message)
{
    uint64_t left_out = 0;
    if (limits_.log_refusal(uid, CallerLimits::Clock::now(), &left_out)) {
        if (left_out == 0)
            NVS_NOTICE("refused uid %d: %s", static_cast<int>(uid), message.c_str());
        else
            NVS_NOTICE(
                "refused uid %d: %s (and %llu refusals of this uid in the last second, "
                "not logged)",
                static_cast<int>(uid), message.c_str(), static_cast<unsigned long long>(left_out));
    }
    return sdbus::Error(name, message);
}

sdbus::Error BusAuthorizer::refuse(uid_t uid, const std::string& message)
{
    limits_.refused_without_asking(uid, CallerLimits::Clock::now());
    return refusal(uid, kAccessDenied, message);
}

void BusAuthorizer::authorize(const std::string& sender, Request request, bool interactive,
                              const std::string& what, Outcome done)
{
    caller_uid(sender, [this, sender, request, interactive, what, done](
                           std::optional<uid_t> uid, const sdbus::Error* error) mutable {
        if (!uid) {
            NVS_WARN("cannot tell who sent %s: %s", what.c_str(),
                     error != nullptr ? error->getMessage().c_str() : "no answer");
            // Unknown callers get polkit's verdict like anyone else.
        }
        request.caller = uid.value_or(kUnknownUid);
        ask_polkit(sender, request, interactive, what, done);
    });
}

void BusAuthorizer::ask_polkit(const std::string& sender, const Request& request, bool interactive,
                               const std::string& what, const Outcome& done)
{
    const auto action = required_action(request);
    if (!action) {
        done(nullptr);
        return;
    }
    const uid_t uid = request.caller;
    const auto now = CallerLimits::Clock::now();
    switch (limits_.admit(uid, now)) {
        case CallerLimits::Admission::Ask:
            break;
        case CallerLimits::Admission::RefusedTooOften: {
            const sdbus::Error e = refusal(
                uid, kLimitsExceeded,
                what + " refused without asking polkit: too many requests of uid " +
                    std::to_string(static_cast<int>(uid)) + " were refused lately; try again in " +
                    seconds_text(limits_.retry_after(uid, now)));
            done(&e);
            return;
        }
        case CallerLimits::Admission::TooManyPending: {
            const sdbus::Error e =
                refusal(uid, kLimitsExceeded,
                        what +
                            " refused: too many authorization checks are waiting for polkit; "
                            "try again later");
            done(&e);
            return;
        }
    }
    const std::string action_id(*action);
    polkit_.check(sender, action_id, interactive,
                  [this, uid, action_id, what, done](Verdict verdict, const std::string& detail) {
                      const bool allowed = verdict == Verdict::Allowed;
                      limits_.finished(uid, !allowed, CallerLimits::Clock::now());
                      if (allowed) {
                          NVS_NOTICE("uid %d allowed by polkit (%s): %s", static_cast<int>(uid),
                                     action_id.c_str(), what.c_str());
                          done(nullptr);
                          return;
                      }
                      const sdbus::Error e = refusal(
                          uid, kAccessDenied, denial_message(what, action_id, verdict, detail));
                      done(&e);
                  });
}

}  // namespace nvshare::daemon
