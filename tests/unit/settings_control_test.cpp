// SettingsControl on its own: a fake target (settings_target.h) stands in
// for the Server, so that the order a change goes through (checked, saved,
// applied to the scheduler, then one after_settings_change) is seen without
// a loop or a socket.
#include "daemon/settings_control.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

class FakeTarget final : public SettingsTarget {
public:
    Scheduler& settings_scheduler() override { return scheduler; }
    void after_settings_change(const SettingChange& change) override { changes.push_back(change); }
    void set_admin_rules(std::vector<PriorityRule> rules, Duration grace,
                         Duration log_waits_after) override
    {
        ++admin_rules_set;
        last_rules = std::move(rules);
        last_grace = grace;
        last_log_waits_after = log_waits_after;
    }

    Scheduler scheduler;
    std::vector<SettingChange> changes;
    int admin_rules_set = 0;
    std::vector<PriorityRule> last_rules;
    Duration last_grace{};
    Duration last_log_waits_after{};
};

class SettingsControlTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        char pattern[] = "/tmp/nvshare-settings-control-test.XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir_ = pattern;
        target_.scheduler.ensure_gpu({"GPU-0", "test", 80 * kGiB});
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    SettingsControl control(const std::string& state_dir)
    {
        return SettingsControl(target_, StateStore(state_dir), configured_, {});
    }

    std::string dir_;
    Options configured_;
    FakeTarget target_;
    int authorized_ = 0;
    const SettingsControl::Authorize authorize_ = [this] { ++authorized_; };
};

}  // namespace

TEST_F(SettingsControlTest, AChangeIsSavedAppliedAndHandedOnOnce)
{
    SettingsControl settings = control(dir_);
    EXPECT_EQ(settings.set_mode("off", authorize_), std::nullopt);
    EXPECT_EQ(authorized_, 1);
    EXPECT_EQ(target_.scheduler.settings().mode, Mode::Off);
    EXPECT_EQ(StateStore(dir_).load().mode, Mode::Off);
    ASSERT_EQ(target_.changes.size(), 1u);
    EXPECT_EQ(target_.changes[0].setting, "anti-thrashing");
    EXPECT_EQ(target_.changes[0].gpu_uuid, "");
    EXPECT_EQ(target_.changes[0].value, "off");
    EXPECT_TRUE(target_.changes[0].tell_clients);

    // The value it has already: nothing asked, saved or handed on.
    EXPECT_EQ(settings.set_mode("off", authorize_), std::nullopt);
    EXPECT_EQ(authorized_, 1);
    EXPECT_EQ(target_.changes.size(), 1u);
}

TEST_F(SettingsControlTest, AGpusOwnSettingIsNotToldToTheClients)
{
    SettingsControl settings = control(dir_);
    EXPECT_EQ(settings.set_gpu_time_quantum(0, 2'000'000, authorize_), std::nullopt);
    EXPECT_EQ(target_.scheduler.time_quantum_of(0), 2s);
    ASSERT_EQ(target_.changes.size(), 1u);
    EXPECT_EQ(target_.changes[0].setting, "time-quantum");
    EXPECT_EQ(target_.changes[0].gpu_uuid, "GPU-0");
    EXPECT_EQ(target_.changes[0].value, "2000000");
    EXPECT_FALSE(target_.changes[0].tell_clients);
}

TEST_F(SettingsControlTest, NothingChangesWhenTheValueIsInvalidRefusedOrNotSaved)
{
    SettingsControl settings = control(dir_);
    auto refused = settings.set_mode("sometimes", authorize_);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->why, Refusal::Why::Invalid);
    EXPECT_EQ(authorized_, 0);

    const SettingsControl::Authorize deny = [] { throw std::runtime_error("denied"); };
    EXPECT_THROW(settings.set_capacity(0, 40 * kGiB, deny), std::runtime_error);

    // A state directory under a file cannot be made, even by root.
    std::ofstream(dir_ + "/file") << "";
    SettingsControl unsaved = control(dir_ + "/file/state");
    refused = unsaved.set_capacity(0, 40 * kGiB, authorize_);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->why, Refusal::Why::NotSaved);

    EXPECT_EQ(target_.scheduler.gpus()[0].capacity, 80 * kGiB);
    EXPECT_TRUE(target_.changes.empty());
}

TEST_F(SettingsControlTest, ResettingAGpuGivesItsConfiguredSettingsBack)
{
    SettingsControl settings = control(dir_);
    ASSERT_EQ(settings.set_capacity(0, 40 * kGiB, authorize_), std::nullopt);
    ASSERT_EQ(settings.set_gpu_mode(0, "on", authorize_), std::nullopt);
    target_.changes.clear();

    EXPECT_EQ(settings.reset_gpu(0, authorize_), std::nullopt);
    EXPECT_EQ(target_.scheduler.gpus()[0].capacity, 80 * kGiB);
    EXPECT_FALSE(target_.scheduler.gpu_modes().contains("GPU-0"));
    EXPECT_TRUE(StateStore(dir_).load().empty());
    ASSERT_EQ(target_.changes.size(), 2u);
    EXPECT_EQ(target_.changes[0].setting, "anti-thrashing");
    EXPECT_EQ(target_.changes[0].value, "default");
    EXPECT_EQ(target_.changes[1].setting, "capacity");
    EXPECT_EQ(target_.changes[1].value, std::to_string(80 * kGiB));

    // Nothing of the GPU's is left to reset.
    const int asked = authorized_;
    EXPECT_EQ(settings.reset_gpu(0, authorize_), std::nullopt);
    EXPECT_EQ(authorized_, asked);
    EXPECT_EQ(target_.changes.size(), 2u);
}

TEST_F(SettingsControlTest, AReloadKeepsTheRunTimeChangesOnTop)
{
    SettingsControl settings = control(dir_);
    ASSERT_EQ(settings.set_time_quantum(5'000'000, authorize_), std::nullopt);
    target_.changes.clear();

    Options reloaded = configured_;
    reloaded.scheduler.mode = Mode::On;
    reloaded.scheduler.time_quantum = 60s;
    reloaded.scheduler.grace = 3s;
    settings.reload(reloaded);

    EXPECT_EQ(target_.admin_rules_set, 1);
    EXPECT_EQ(target_.last_grace, 3s);
    EXPECT_EQ(target_.scheduler.settings().mode, Mode::On);
    EXPECT_EQ(target_.scheduler.settings().time_quantum, 5s);  // the run-time change stays
    ASSERT_EQ(target_.changes.size(), 1u);
    EXPECT_EQ(target_.changes[0].setting, "anti-thrashing");
    EXPECT_EQ(target_.changes[0].value, "on");
}
