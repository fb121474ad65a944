// Who a uid is, for what nvshared counts per user: a subordinate uid
// (/etc/subuid, the ranges rootless containers and user namespaces map) is
// its owner's, so that a person with 65,536 subordinate uids is one user to
// the connection limits, the GPU table, fairness, the status rate and the
// usage records, not 65,537. The pure part (parse and look up); the daemon
// reads the file at start and on reload (principals_file.cpp).
//
// What stays the uid itself: whether a process is root (root's exemptions
// are never reached through a subordinate uid), the priority rules (they
// name users and groups), and the uid shown per client. Ranges root owns
// are left out: root's subordinate uids belong to system containers that
// are not one person, and their processes are not root. /etc/subgid is not
// read: a process is charged by its uid alone.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nvshare::daemon {

class Principals {
public:
    // Owner names resolve through `uid_of` (numeric owners need none).
    using Resolve = std::function<std::optional<uid_t>(const std::string& name)>;

    Principals() = default;
    // /etc/subuid's text: "owner:first:count" per line (shadow-utils'
    // subuid(5)); `problems` gets one line per entry left out and why.
    static Principals parse(std::string_view text, const Resolve& uid_of,
                            std::vector<std::string>* problems);

    // The uid `uid` is charged to: its owner's if it is subordinate, else
    // itself.
    uid_t of(uid_t uid) const;
    size_t ranges() const { return ranges_.size(); }

private:
    struct Range {
        uid_t first;
        uid_t last;  // inclusive
        uid_t owner;
    };
    std::vector<Range> ranges_;  // sorted by first, not overlapping
};

}  // namespace nvshare::daemon
