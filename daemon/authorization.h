// Who may change nvshared's settings or revoke a lock over D-Bus: the pure
// part (no I/O). Root may always; anyone else needs a polkit action, which
// daemon/polkit.h asks about. The action ids are those of
// polkit/org.nvshare.scheduler1.policy.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace nvshare::daemon {

inline constexpr std::string_view kActionSetSettings = "org.nvshare.scheduler1.set-settings";
inline constexpr std::string_view kActionRevoke = "org.nvshare.scheduler1.revoke";
inline constexpr std::string_view kActionRevokeOwn = "org.nvshare.scheduler1.revoke-own";

inline constexpr uid_t kUnknownUid = static_cast<uid_t>(-1);  // no process has it

enum class Operation {
    ChangeSettings,  // a settings property, or ResetSettings
    Revoke,          // RevokeClient
};

struct Request {
    Operation operation = Operation::ChangeSettings;
    uid_t caller = kUnknownUid;  // from the bus driver
    uid_t owner = kUnknownUid;   // for Revoke: the uid of the client's process
};

// The polkit action `request` needs, or nullopt when the caller is root and
// polkit is not asked at all.
std::optional<std::string_view> required_action(const Request& request);

// What polkit said, or why it said nothing.
enum class Verdict {
    Allowed,
    Denied,       // not authorized, and no authentication would help
    Challenge,    // authentication would help, but nvshared does not ask interactively
    Unavailable,  // polkitd is not on the bus
    Failed,       // asking failed: an error, or no answer in time
};

// The AccessDenied message for a refusal: says what was refused, the action
// and why, in one line. `detail` is the bus error, for Failed.
std::string denial_message(std::string_view what, std::string_view action, Verdict verdict,
                           std::string_view detail = {});

}  // namespace nvshare::daemon
