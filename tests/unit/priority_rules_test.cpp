// The admin's priority rules: how nvshare.conf spells them and the class
// they settle a process on.
#include "daemon/priority_rules.h"

#include <gtest/gtest.h>

using namespace nvshare::daemon;
using nvshare::proto::Priority;

namespace {

// A fake NSS: alice is 1000, bob 1001; the group gpu is 44, staff 50.
const NameLookup kNames{
    [](const std::string& name) -> std::optional<uint32_t> {
        if (name == "alice")
            return 1000;
        if (name == "bob")
            return 1001;
        return std::nullopt;
    },
    [](const std::string& name) -> std::optional<uint32_t> {
        if (name == "gpu")
            return 44;
        if (name == "staff")
            return 50;
        return std::nullopt;
    },
};

PriorityRule rule(std::string_view text)
{
    std::string error;
    const auto r = parse_priority_rule(text, kNames, &error);
    EXPECT_TRUE(r) << text << ": " << error;
    return r.value_or(PriorityRule{});
}

std::string error_of(std::string_view text, const NameLookup& names = kNames)
{
    std::string error;
    EXPECT_FALSE(parse_priority_rule(text, names, &error)) << text;
    return error;
}

std::vector<PriorityRule> rules(std::initializer_list<std::string_view> texts)
{
    std::vector<PriorityRule> out;
    for (const std::string_view t : texts)
        out.push_back(rule(t));
    return out;
}

// uid 1000, groups 1000, 44 (gpu) and 50 (staff), in jupyter.service.
const std::vector<uint32_t> kGroups{1000, 44, 50};
const ProcessIdentity kAlice{1000, kGroups, "/system.slice/jupyter.service"};

Priority settle(const std::vector<PriorityRule>& r, Priority asked = Priority::Unset,
                const ProcessIdentity& who = kAlice)
{
    return settle_priority(r, who, asked);
}

}  // namespace

TEST(PriorityRuleParse, EveryForm)
{
    EXPECT_EQ(rule("user:alice=interactive"),
              (PriorityRule{RuleKind::User, 1000, "", Priority::Interactive}));
    EXPECT_EQ(rule("user:4242=batch"), (PriorityRule{RuleKind::User, 4242, "", Priority::Batch}));
    EXPECT_EQ(rule("group:gpu=normal"), (PriorityRule{RuleKind::Group, 44, "", Priority::Normal}));
    EXPECT_EQ(rule("group:0=batch"), (PriorityRule{RuleKind::Group, 0, "", Priority::Batch}));
    EXPECT_EQ(rule("unit:batch.slice=batch"),
              (PriorityRule{RuleKind::Unit, 0, "batch.slice", Priority::Batch}));
    EXPECT_EQ(rule("default=batch"), (PriorityRule{RuleKind::Default, 0, "", Priority::Batch}));
    // Blanks around the parts are not part of them.
    EXPECT_EQ(rule("user: bob = batch"), (PriorityRule{RuleKind::User, 1001, "", Priority::Batch}));
    EXPECT_EQ(rule("default = interactive"),
              (PriorityRule{RuleKind::Default, 0, "", Priority::Interactive}));
}

TEST(PriorityRuleParse, NumericIdsNeedNoLookup)
{
    std::string error;
    const auto r = parse_priority_rule("user:1000=batch", NameLookup{}, &error);
    ASSERT_TRUE(r) << error;
    EXPECT_EQ(r->id, 1000u);
    EXPECT_NE(error_of("user:alice=batch", NameLookup{}).find("unknown user 'alice'"),
              std::string::npos);
}

TEST(PriorityRuleParse, UnknownNamesAreErrors)
{
    EXPECT_NE(error_of("user:carol=batch").find("unknown user 'carol'"), std::string::npos);
    EXPECT_NE(error_of("group:wheel=batch").find("unknown group 'wheel'"), std::string::npos);
    // (uid_t)-1 is nobody's; a sign or a number too large is a name.
    EXPECT_NE(error_of("user:4294967295=batch").find("unknown user"), std::string::npos);
    EXPECT_NE(error_of("user:4294967296=batch").find("unknown user"), std::string::npos);
    EXPECT_NE(error_of("user:+1000=batch").find("unknown user"), std::string::npos);
}

TEST(PriorityRuleParse, MalformedRulesSayWhatIsValid)
{
    for (const char* bad :
         {"", "batch", "user:alice", "user:alice=high", "user:alice=Batch", "user:=batch",
          "users:alice=batch", "default:x=batch", "unit:a/b.service=batch", "unit:=batch",
          "alice=batch", "default=", "default=unset"}) {
        const std::string e = error_of(bad);
        EXPECT_NE(e.find("invalid priority rule '" + std::string(bad) + "'"), std::string::npos)
            << e;
        EXPECT_NE(e.find("user:NAME=CLASS, group:NAME=CLASS, unit:NAME=CLASS or default=CLASS"),
                  std::string::npos)
            << e;
    }
}

TEST(PrioritySettle, WithoutARuleNormalIsTheMostAUserMayAskFor)
{
    EXPECT_EQ(settle({}), Priority::Normal);
    // Issue 47: a class above normal is granted by a rule, not taken.
    EXPECT_EQ(settle({}, Priority::Interactive), Priority::Normal);
    EXPECT_EQ(settle({}, Priority::Batch), Priority::Batch);
    // Rules that do not match are as good as none.
    const auto others = rules({"user:bob=batch", "group:1234=batch", "unit:other.service=batch"});
    EXPECT_EQ(settle(others), Priority::Normal);
    EXPECT_EQ(settle(others, Priority::Interactive), Priority::Normal);
    // Root, who writes the rules, takes what it asks for.
    const std::vector<uint32_t> none;
    EXPECT_EQ(settle({}, Priority::Interactive, {0, none, ""}), Priority::Interactive);
    EXPECT_EQ(settle(others, Priority::Interactive, {0, none, ""}), Priority::Interactive);
}

TEST(PrioritySettle, TheMostSpecificMatchingRuleWins)
{
    const auto r = rules({"unit:jupyter.service=interactive", "user:alice=batch",
                          "group:gpu=normal", "default=batch"});
    EXPECT_EQ(settle(r), Priority::Interactive);  // unit > user
    const auto no_unit = rules({"group:gpu=interactive", "user:alice=batch", "default=normal"});
    EXPECT_EQ(settle(no_unit), Priority::Batch);  // user > group, whatever the order
    const auto no_user = rules({"default=batch", "group:gpu=interactive"});
    EXPECT_EQ(settle(no_user), Priority::Interactive);  // group > default
    EXPECT_EQ(settle(rules({"default=batch"})), Priority::Batch);
}

TEST(PrioritySettle, SeveralRulesOfOneKindGiveTheHighestClass)
{
    EXPECT_EQ(settle(rules({"group:gpu=batch", "group:staff=interactive"})), Priority::Interactive);
    EXPECT_EQ(settle(rules({"group:staff=normal", "group:gpu=batch"})), Priority::Normal);
    EXPECT_EQ(settle(rules({"default=batch", "default=normal"})), Priority::Normal);
    EXPECT_EQ(settle(rules({"unit:system.slice=batch", "unit:jupyter.service=normal"})),
              Priority::Normal);
}

TEST(PrioritySettle, TheRuleIsTheHighestClassOneMayAskFor)
{
    const auto r = rules({"user:alice=normal"});
    EXPECT_EQ(settle(r, Priority::Interactive), Priority::Normal);  // capped
    EXPECT_EQ(settle(r, Priority::Normal), Priority::Normal);
    EXPECT_EQ(settle(r, Priority::Batch), Priority::Batch);  // anyone may ask for less
    const auto batch = rules({"default=batch"});
    EXPECT_EQ(settle(batch, Priority::Interactive), Priority::Batch);
    const auto top = rules({"unit:jupyter.service=interactive", "user:alice=batch"});
    EXPECT_EQ(settle(top, Priority::Interactive), Priority::Interactive);
    EXPECT_EQ(settle(top, Priority::Batch), Priority::Batch);
}

TEST(PrioritySettle, GroupsAreTheGidAndTheSupplementaryOnes)
{
    const auto r = rules({"group:1000=batch"});
    EXPECT_EQ(settle(r), Priority::Batch);
    const std::vector<uint32_t> gids{7};
    EXPECT_EQ(settle(r, Priority::Unset, {1000, gids, ""}), Priority::Normal);
}

TEST(PrioritySettle, UnitsMatchAWholeComponentOfTheCgroupPath)
{
    const auto slice = rules({"unit:user-1000.slice=batch"});
    const std::vector<uint32_t> none;
    const ProcessIdentity session{
        1000, none, "/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope"};
    EXPECT_EQ(settle(slice, Priority::Unset, session), Priority::Batch);
    // Not a prefix, a suffix or a part of a component.
    for (const char* unit : {"user-1000", "1000.slice", "user.slice/user-1000.slice", "user"})
        EXPECT_EQ(settle({PriorityRule{RuleKind::Unit, 0, unit, Priority::Batch}}, Priority::Unset,
                         session),
                  Priority::Normal)
            << unit;
    // A process whose cgroup is unknown matches no unit rule.
    EXPECT_EQ(settle(slice, Priority::Unset, {1000, none, ""}), Priority::Normal);
}
