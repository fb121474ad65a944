// The admin's priority rules (nvshare.conf(5), priority) and the class they
// settle a process on. Pure: names are turned into ids by the lookup the
// caller passes (the config file's loader asks the system's databases).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/protocol.h"

namespace nvshare::daemon {

// In order of specificity: a matching rule of a later kind beats the others.
enum class RuleKind : uint8_t { Default, Group, User, Unit };

struct PriorityRule {
    RuleKind kind = RuleKind::Default;
    uint32_t id = 0;   // User: the uid; Group: the gid
    std::string unit;  // Unit: one component of a cgroup path
    proto::Priority priority = proto::Priority::Normal;

    bool operator==(const PriorityRule&) const = default;
};

// User and group names to ids (nullopt: no such name). An empty function
// knows no names, so only numeric ids are accepted.
struct NameLookup {
    std::function<std::optional<uint32_t>(const std::string&)> user;
    std::function<std::optional<uint32_t>(const std::string&)> group;
};

// One rule as the config file spells it: "user:NAME=CLASS",
// "group:NAME=CLASS", "unit:NAME=CLASS" or "default=CLASS", NAME of a user or
// group a name or a numeric id. nullopt and *error on anything else.
std::optional<PriorityRule> parse_priority_rule(std::string_view text, const NameLookup& names,
                                                std::string* error);

// Who a process is, as the rules look at it.
struct ProcessIdentity {
    uint32_t uid = 0;
    std::vector<uint32_t> gids;    // its gid and supplementary groups
    std::string_view cgroup_path;  // e.g. "/system.slice/jupyter.service"
};

// The class the process gets: the most specific matching rule (the highest
// class among several of that kind) gives it when it asks for none, and is the
// highest it may ask for; without a matching rule, Normal or what it asks.
// Never Unset.
proto::Priority settle_priority(const std::vector<PriorityRule>& rules, const ProcessIdentity& who,
                                proto::Priority asked);

}  // namespace nvshare::daemon
