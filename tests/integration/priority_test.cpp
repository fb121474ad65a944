// Priority classes end to end: nvshared started with the admin's rules in its
// config file settles each client's class from what it asks for in Hello and
// the rules that match it (its uid, its groups, its cgroup path), and reports
// it in the status document.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/lock_client.h"
#include "daemon/process_cgroup.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/test_gpu.h"
#include "tests/support/wait.h"
#include "tests/support/welcomed.h"

namespace nvshare::test {
namespace {

using proto::Priority;

class PriorityRules : public testing::Test {
protected:
    // nvshared with `rules` as its whole config file.
    void start(const std::string& rules)
    {
        const std::string config = daemon_.dir().path() + "/nvshare.conf";
        write_text(config, rules);
        ASSERT_TRUE(daemon_.start({"--config", config}));
        ASSERT_EQ(daemon_.log().find("ignored"), std::string::npos) << daemon_.log();
    }

    // A client of this process, named `comm`, registered asking for `asked`;
    // its class as the status document says.
    std::string settled(const std::string& comm, Priority asked)
    {
        auto c = welcomed(daemon_.socket(), comm, {test_gpu(0, 1 << 30)}, asked);
        EXPECT_TRUE(c.has_value()) << comm;
        if (c)
            clients_.push_back(std::move(*c));
        const auto status = daemon_.wait_status([&](const nlohmann::json& s) {
            for (const auto& client : s["clients"])
                if (client["comm"] == comm)
                    return true;
            return false;
        });
        for (const auto& client : status["clients"])
            if (client["comm"] == comm)
                return client["priority"].get<std::string>();
        return "(not registered)";
    }

    Daemon daemon_;
    std::vector<LockClient> clients_;
};

TEST_F(PriorityRules, WithoutRulesNormalUnlessAsked)
{
    start("");
    EXPECT_EQ(settled("none", Priority::Unset), "normal");
    EXPECT_EQ(settled("interactive", Priority::Interactive), "interactive");
    EXPECT_EQ(settled("batch", Priority::Batch), "batch");
}

TEST_F(PriorityRules, TheUserRuleBeatsTheGroupRuleAndCapsWhatIsAsked)
{
    start(
        "priority = default=batch\n"
        "priority = group:" +
        std::to_string(getgid()) +
        "=interactive\n"
        "priority = user:" +
        std::to_string(getuid()) + "=normal\n");
    EXPECT_EQ(settled("none", Priority::Unset), "normal");
    EXPECT_EQ(settled("too-high", Priority::Interactive), "normal");
    EXPECT_EQ(settled("lower", Priority::Batch), "batch");
    // The journal's line (stderr here) names the class.
    EXPECT_NE(daemon_.log().find("priority normal"), std::string::npos) << daemon_.log();
}

TEST_F(PriorityRules, TheGroupRuleMatchesTheProcesssGroup)
{
    start("priority = default=batch\npriority = group:" + std::to_string(getgid()) +
          "=interactive\n");
    EXPECT_EQ(settled("none", Priority::Unset), "interactive");
}

TEST_F(PriorityRules, AUnitRuleMatchesAComponentOfTheCgroupPathAndBeatsTheUserRule)
{
    // The path nvshared reads for this process, by its own rule.
    const std::string path = daemon::cgroup_path(read_text("/proc/self/cgroup"));
    if (path.empty())
        GTEST_SKIP() << "this process is in the root cgroup: no unit to match";
    const std::string first = path.substr(1, path.find('/', 1) - 1);
    start("priority = user:" + std::to_string(getuid()) + "=batch\n" + "priority = unit:" + first +
          "=interactive\n");
    EXPECT_EQ(settled("none", Priority::Unset), "interactive") << path;
    EXPECT_EQ(settled("lower", Priority::Batch), "batch") << path;
}

TEST_F(PriorityRules, AUnitRuleNeedsAWholeComponent)
{
    const std::string path = daemon::cgroup_path(read_text("/proc/self/cgroup"));
    if (path.empty())
        GTEST_SKIP() << "this process is in the root cgroup: no unit to match";
    const std::string last(daemon::cgroup_name(path));
    start("priority = unit:" + last.substr(0, last.size() - 1) + "=batch\n");
    EXPECT_EQ(settled("none", Priority::Unset), "normal") << path;
}

TEST_F(PriorityRules, BadRulesAreReportedByLineAndTheRestApplies)
{
    const std::string config = daemon_.dir().path() + "/nvshare.conf";
    write_text(config,
               "priority = user:no-such-user-of-nvshare=batch\n"
               "priority = default=urgent\n"
               "priority = default=batch\n");
    ASSERT_TRUE(daemon_.start({"--config", config}));
    EXPECT_NE(daemon_.log().find("line 1: unknown user 'no-such-user-of-nvshare'"),
              std::string::npos)
        << daemon_.log();
    EXPECT_NE(daemon_.log().find("line 2: invalid priority rule 'default=urgent'"),
              std::string::npos)
        << daemon_.log();
    EXPECT_EQ(settled("none", Priority::Unset), "batch");
}

}  // namespace
}  // namespace nvshare::test
