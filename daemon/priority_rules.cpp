#include "daemon/priority_rules.h"

#include <charconv>

#include "common/text.h"

namespace nvshare::daemon {

namespace {

constexpr const char* kRuleForms =
    "user:NAME=CLASS, group:NAME=CLASS, unit:NAME=CLASS or default=CLASS; "
    "CLASS: interactive, normal, batch";

// A higher class is a smaller number (Interactive = 1).
bool higher(proto::Priority a, proto::Priority b)
{
    return static_cast<uint32_t>(a) < static_cast<uint32_t>(b);
}

// All digits: the id itself (no name lookup), as chown(1) takes "1000".
std::optional<uint32_t> numeric_id(std::string_view text)
{
    uint32_t id = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || text[0] == '+' ||
        id == UINT32_MAX)  // (uid_t)-1 is nobody's
        return std::nullopt;
    return id;
}

std::optional<uint32_t> resolve(
    std::string_view name, const char* what,
    const std::function<std::optional<uint32_t>(const std::string&)>& lookup, std::string* error)
{
    if (const auto id = numeric_id(name))
        return id;
    if (lookup)
        if (const auto id = lookup(std::string(name)))
            return id;
    *error = std::string("unknown ") + what + " '" + std::string(name) + "' in priority rule";
    return std::nullopt;
}

bool matches(const PriorityRule& rule, const ProcessIdentity& who)
{
    switch (rule.kind) {
        case RuleKind::Default:
            return true;
        case RuleKind::User:
            return rule.id == who.uid;
        case RuleKind::Group:
            for (const uint32_t gid : who.gids)
                if (gid == rule.id)
                    return true;
            return false;
        case RuleKind::Unit: {
            std::string_view path = who.cgroup_path;
            while (!path.empty()) {
                const size_t slash = path.find('/');
                if (path.substr(0, slash) == rule.unit)
                    return true;
                path =
                    slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
            }
            return false;
        }
    }
    return false;
}

}  // namespace

std::optional<PriorityRule> parse_priority_rule(std::string_view text, const NameLookup& names,
                                                std::string* error)
{
    auto invalid = [&] {
        *error = "invalid priority rule '" + std::string(text) + "' (valid: " + kRuleForms + ")";
        return std::nullopt;
    };
    const size_t eq = text.rfind('=');
    if (eq == std::string_view::npos)
        return invalid();
    const std::string_view who = trim(text.substr(0, eq));
    const std::string_view cls = trim(text.substr(eq + 1));
    PriorityRule rule;
    rule.priority = proto::parse_priority(cls.data(), cls.size());
    if (rule.priority == proto::Priority::Unset)
        return invalid();
    if (who == "default")
        return rule;
    const size_t colon = who.find(':');
    if (colon == std::string_view::npos)
        return invalid();
    const std::string_view kind = trim(who.substr(0, colon));
    const std::string_view name = trim(who.substr(colon + 1));
    if (name.empty())
        return invalid();
    if (kind == "unit") {
        if (name.find('/') != std::string_view::npos)  // it matches one component
            return invalid();
        rule.kind = RuleKind::Unit;
        rule.unit = std::string(name);
        return rule;
    }
    const bool user = kind == "user";
    if (!user && kind != "group")
        return invalid();
    const auto id = user ? resolve(name, "user", names.user, error)
                         : resolve(name, "group", names.group, error);
    if (!id)
        return std::nullopt;
    rule.kind = user ? RuleKind::User : RuleKind::Group;
    rule.id = *id;
    return rule;
}

proto::Priority settle_priority(const std::vector<PriorityRule>& rules, const ProcessIdentity& who,
                                proto::Priority asked)
{
    const PriorityRule* best = nullptr;
    for (const PriorityRule& rule : rules) {
        if (!matches(rule, who))
            continue;
        if (best == nullptr || rule.kind > best->kind ||
            (rule.kind == best->kind && higher(rule.priority, best->priority)))
            best = &rule;
    }
    if (asked == proto::Priority::Unset)
        return best != nullptr ? best->priority : proto::Priority::Normal;
    // Like nice: anyone may ask for less than the rules give, not for more;
    // without a rule, a class above normal is root's alone to take.
    const proto::Priority ceiling = best != nullptr ? best->priority
                                    : who.uid == 0  ? proto::Priority::Interactive
                                                    : proto::Priority::Normal;
    return higher(asked, ceiling) ? ceiling : asked;
}

}  // namespace nvshare::daemon
