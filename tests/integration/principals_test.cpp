// A person is one principal (issue 47): a subordinate uid (/etc/subuid) is
// charged to its owner for the connection limit, the GPU table, fairness
// and the usage records. This program enters a mount namespace of its own
// first (main), and each test bind-mounts a test subuid file over
// /etc/subuid there; nvshared, its child, reads that one. The host's
// /etc/subuid is never changed.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "common/lock_client.h"
#include "tests/integration/as_user.h"
#include "tests/integration/test_client.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/mount_namespace.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_gpu.h"
#include "tests/support/welcomed.h"

namespace nvshare::test {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uid_t kOwner = 1000;
constexpr uid_t kFirstSubordinate = 100000;
constexpr uid_t kOther = 2000;
constexpr const char* kSubuid = "/etc/subuid";

std::string g_skip;  // why this program cannot run its tests here

// /etc/subuid with `text` for one test's lifetime.
class TestSubuid {
public:
    explicit TestSubuid(const std::string& text)
    {
        write_text(dir_ / "subuid", text);
        chmod((dir_ / "subuid").c_str(), 0644);
        if (mount((dir_ / "subuid").c_str(), kSubuid, nullptr, MS_BIND, nullptr) != 0)
            throw std::runtime_error(std::string("cannot bind-mount over /etc/subuid: ") +
                                     strerror(errno));
    }
    ~TestSubuid() { umount2(kSubuid, MNT_DETACH); }
    TestSubuid(const TestSubuid&) = delete;
    TestSubuid& operator=(const TestSubuid&) = delete;

private:
    TempDir dir_;
};

class PrincipalsTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!g_skip.empty())
            GTEST_SKIP() << g_skip;
        subuid = std::make_unique<TestSubuid>(std::to_string(kOwner) + ":" +
                                              std::to_string(kFirstSubordinate) + ":65536\n");
    }
    std::unique_ptr<TestSubuid> subuid;
    TempDir no_gpus;  // --gpu-info-dir: the host lists none
};

// One client registered as `uid`, kept until the AsUser goes; its report
// line is "welcome" or "refused".
std::unique_ptr<AsUser> client_as(uid_t uid, const std::string& socket, uint8_t gpu)
{
    return std::make_unique<AsUser>(uid, [socket, gpu](FILE* out, int stop) {
        auto c = welcomed(socket, "sub", {test_gpu(gpu, 16 * kGiB)});
        fprintf(out, "%s\n", c ? "welcome" : "refused");
        wait_for_stop(stop);
    });
}

TEST_F(PrincipalsTest, SubordinateUidsShareTheirOwnersConnectionLimit)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--max-clients-per-user", "4", "--gpu-info-dir", no_gpus.path()}));
    std::vector<std::unique_ptr<AsUser>> mine;
    int welcomed_subordinates = 0;
    for (uid_t i = 0; i < 8; ++i) {
        mine.push_back(client_as(kFirstSubordinate + i * 1000, d.socket(), 0));
        welcomed_subordinates += mine.back()->line() == "welcome";
    }
    // Eight uids, one person: four connections, as for one uid.
    EXPECT_EQ(welcomed_subordinates, 4);
    EXPECT_NE(d.log().find("user 1000 (whose subordinate uid"), std::string::npos) << d.log();
    // Another user has their own four.
    std::vector<std::unique_ptr<AsUser>> theirs;
    int welcomed_other = 0;
    for (int i = 0; i < 4; ++i) {
        theirs.push_back(client_as(kOther, d.socket(), 0));
        welcomed_other += theirs.back()->line() == "welcome";
    }
    EXPECT_EQ(welcomed_other, 4);
}

TEST_F(PrincipalsTest, SubordinateUidsShareTheirOwnersGpuTable)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--gpu-info-dir", no_gpus.path()}));
    // Eight subordinate uids each name a GPU the host does not list: four
    // in all, as one user may (kMaxUnlistedGpusPerUser).
    std::vector<std::unique_ptr<AsUser>> mine;
    int accepted = 0;
    for (uid_t i = 0; i < 8; ++i) {
        mine.push_back(client_as(kFirstSubordinate + i, d.socket(), static_cast<uint8_t>(100 + i)));
        accepted += mine.back()->line() == "welcome";
    }
    EXPECT_EQ(accepted, 4);
    auto other = client_as(kOther, d.socket(), 200);
    EXPECT_EQ(other->line(), "welcome");
}

// Three clients of one person's subordinate uids and one of another user
// take turns on one GPU, 20 holds of 20 ms each: by held time per person
// the lone client gets every other turn and is done about halfway (by held
// time per uid it got one turn in four and finished last). The usage
// records are the two people's.
TEST_F(PrincipalsTest, SubordinateUidsShareTheirOwnersTurnsAndUsage)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on", "--gpu-info-dir", no_gpus.path()}));
    const std::vector<std::string> args{"--cycles", "20", "--hold", "20ms"};
    std::vector<std::unique_ptr<TestClient>> clients;
    for (uid_t i = 0; i < 3; ++i)
        clients.push_back(std::make_unique<TestClient>(d.socket(), args, kFirstSubordinate + i));
    clients.push_back(std::make_unique<TestClient>(d.socket(), args, kOther));
    for (auto& c : clients)
        EXPECT_EQ(c->finish(std::chrono::seconds(60)), 0) << c->transcript();
    uint64_t start = UINT64_MAX, end = 0;
    for (auto& c : clients) {
        const auto grants = c->events_named("grant");
        ASSERT_EQ(grants.size(), 20u) << c->transcript();
        start = std::min(start, grants.front().ns);
        end = std::max(end, grants.back().ns);
    }
    const double lone_done =
        static_cast<double>(clients.back()->events_named("grant").back().ns - start) /
        static_cast<double>(end - start);
    printf("the other user's last grant came at %.2f of the run\n", lone_done);
    EXPECT_LT(lone_done, 0.75);
    const auto status = d.status();
    std::map<uint64_t, uint64_t> grants_by_uid;
    for (const auto& u : status["usage"])
        grants_by_uid[u["uid"].get<uint64_t>()] += u["grants"].get<uint64_t>();
    EXPECT_EQ(grants_by_uid, (std::map<uint64_t, uint64_t>{{kOwner, 60}, {kOther, 20}}))
        << status["usage"].dump();
}

}  // namespace
}  // namespace nvshare::test

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    using nvshare::test::g_skip;
    // The tests' subuid files need a mount namespace (and root, for other
    // users' clients).
    if (access(nvshare::test::kSubuid, F_OK) != 0)
        g_skip = "no /etc/subuid to mount a test one over";
    else
        g_skip = nvshare::test::enter_private_mount_namespace();
    return RUN_ALL_TESTS();
}
