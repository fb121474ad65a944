// Clients are untrusted: every local user may connect to the lock socket, so
// nothing one sends or owns may end the daemon, decide what others get, or
// lock them out. Each test is an attack seen on an earlier nvshared (issue
// 19), made by a raw client, most of them as another user.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "common/lock_client.h"
#include "common/uuid.h"
#include "tests/integration/as_user.h"
#include "tests/integration/frames.h"
#include "tests/integration/test_client.h"
#include "tests/support/daemon.h"
#include "tests/support/handover.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_gpu.h"
#include "tests/support/welcomed.h"

namespace nvshare::test {
namespace {

using proto::ErrorCode;
using proto::MsgType;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uid_t kNobody = 65534;

// The Error frame a client got (its code and text), or nullopt.
std::optional<std::pair<uint32_t, std::string>> error_of(LockClient& c, Millis timeout = kTimeout)
{
    const auto f = c.expect(MsgType::Error, timeout);
    if (!f)
        return std::nullopt;
    return std::make_pair(f->as<proto::ErrorFixed>().code, f->text(sizeof(proto::ErrorFixed)));
}

void require_root()
{
    if (getuid() != 0)
        GTEST_SKIP() << "other users' clients need root";
}

// ---- strings ----------------------------------------------------------------------

TEST(Untrusted, CommandCutMidCharacterLeavesTheDaemonAndItsStatusAlive)
{
    require_root();
    Daemon d;
    ASSERT_TRUE(d.start());
    // What the kernel keeps of "abcdefghijklmn训练": 15 bytes, the CJK
    // character cut after its second byte; the GPU's name not UTF-8 either.
    const std::string comm = std::string("abcdefghijklmn训练").substr(0, 15);
    GpuSpec gpu = test_gpu(0, 16 * kGiB);
    AsUser attacker(kNobody, [&](FILE* out, int stop) {
        const auto c = welcomed(d.socket(), comm, {gpu});
        fprintf(out, "%s\n", c ? "welcome" : "refused");
        // Everyone's status query, nobody's too: the daemon must answer.
        std::string error;
        const std::string status = LockClient::query_status(d.socket(), &error);
        fprintf(out, "%s\n", status.empty() ? "no status" : "status");
        wait_for_stop(stop);
    });
    ASSERT_EQ(attacker.line(), "welcome");
    EXPECT_EQ(attacker.line(), "status");
    const auto status = d.status();
    ASSERT_TRUE(status.is_object()) << "the daemon did not answer: " << d.log();
    bool found = false;
    for (const auto& c : status["clients"])
        if (c["uid"] == kNobody) {
            found = true;
            EXPECT_EQ(c["comm"], "abcdefghijklmn\xEF\xBF\xBD");
        }
    EXPECT_TRUE(found) << status.dump();
    attacker.finish();
    EXPECT_TRUE(d.process().running()) << d.log();
}

TEST(Untrusted, GpuNameThatIsNotUtf8IsShownReplaced)
{
    Daemon d;
    ASSERT_TRUE(d.start());
    GpuSpec gpu = test_gpu(0, 16 * kGiB);
    auto payload = hello_payload({gpu});
    // Replace the name field of the one HelloGpu record with bytes that are
    // not UTF-8 and a control character.
    const size_t name_at = sizeof(proto::HelloFixed) + offsetof(proto::HelloGpu, name);
    const char bad[] = "H\xFF\xC0\xAF\nX";
    std::memcpy(payload.data() + name_at, bad, sizeof bad);
    LockClient c;
    std::string error;
    ASSERT_TRUE(c.connect(d.socket(), &error)) << error;
    const Bytes hello = frame(MsgType::Hello, payload);
    ASSERT_TRUE(c.send_raw(hello.data(), hello.size()));
    ASSERT_TRUE(c.expect(MsgType::Welcome, kTimeout));
    const auto status = d.status();
    ASSERT_TRUE(status.is_object()) << d.log();
    EXPECT_EQ(Daemon::gpu_by_number(status, 0)["name"], "H\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD?X");
}

// ---- connections ------------------------------------------------------------------------

TEST(Untrusted, OneUsersConnectionsDoNotLockOthersOut)
{
    require_root();
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on", "--time-quantum", "100ms", "--max-clients",
                         "100", "--max-clients-per-user", "16"}));
    // More connections than the whole daemon serves, all of one user.
    AsUser attacker(kNobody, [&](FILE* out, int stop) {
        std::vector<LockClient> held;
        int refused = 0;
        for (int i = 0; i < 120; ++i) {
            LockClient c;
            std::string error;
            if (!c.connect(d.socket(), &error))
                break;
            if (!c.hello("hog", {test_gpu(0, 16 * kGiB)})) {
                ++refused;
                continue;
            }
            const auto f = c.receive(kTimeout);
            if (f && f->type == MsgType::Welcome)
                held.push_back(std::move(c));
            else
                ++refused;
        }
        fprintf(out, "%zu %d\n", held.size(), refused);
        wait_for_stop(stop);
    });
    const std::string counts = attacker.line();
    EXPECT_EQ(counts, "16 104") << "connections kept, refused";

    // Two other users' busy clients still take turns...
    TestClient a(d.socket(), {"--cycles", "10", "--hold", "5ms"}, 1001);
    TestClient b(d.socket(), {"--cycles", "10", "--hold", "5ms"}, 1002);
    // ...and a third user's new client is granted within a second of asking.
    TestClient c(d.socket(), {"--cycles", "1"}, 1003);
    const auto asked = c.wait_for("request");
    const auto granted = c.wait_for("grant");
    ASSERT_TRUE(asked && granted) << c.transcript();
    EXPECT_LT(granted->ns - asked->ns, 1000000000u);
    ASSERT_EQ(a.finish(), 0) << a.transcript();
    ASSERT_EQ(b.finish(), 0) << b.transcript();
    ASSERT_EQ(c.finish(), 0) << c.transcript();
    struct Hold {
        uint64_t from, to;
    };
    std::vector<Hold> holds;
    for (TestClient* t : {&a, &b}) {
        const auto grants = t->events_named("grant");
        const auto releases = t->events_named("released");
        ASSERT_EQ(grants.size(), 10u) << t->transcript();
        ASSERT_EQ(releases.size(), 10u) << t->transcript();
        for (size_t i = 0; i < grants.size(); ++i)
            holds.push_back({grants[i].ns, releases[i].ns});
    }
    std::sort(holds.begin(), holds.end(), [](auto& x, auto& y) { return x.from < y.from; });
    for (size_t i = 1; i < holds.size(); ++i)
        EXPECT_GE(holds[i].from, holds[i - 1].to) << "two users' holds overlapped";
    attacker.finish();
}

TEST(Untrusted, ConnectionThatSaysNoHelloIsClosed)
{
    Daemon d;
    ASSERT_TRUE(d.start());
    LockClient silent;
    std::string error;
    ASSERT_TRUE(silent.connect(d.socket(), &error)) << error;
    const auto e = error_of(silent, 20s);
    ASSERT_TRUE(e) << "never closed";
    EXPECT_EQ(e->first, static_cast<uint32_t>(ErrorCode::BadOrder));
    EXPECT_NE(e->second.find("no Hello within"), std::string::npos) << e->second;
}

// ---- claims ------------------------------------------------------------------------------------

TEST(Untrusted, ImplausibleGpuMemoryIsRefusedAndALargerClaimChangesNothing)
{
    require_root();
    Daemon d;
    ASSERT_TRUE(d.start());  // auto mode
    auto liar = LockClient();
    std::string error;
    ASSERT_TRUE(liar.connect(d.socket(), &error));
    ASSERT_TRUE(liar.hello("liar", {test_gpu(0, UINT64_MAX)}));
    const auto e = error_of(liar);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->first, static_cast<uint32_t>(ErrorCode::Refused));
    EXPECT_NE(e->second.find("implausible memory size"), std::string::npos) << e->second;

    // The largest plausible claim, first, by another user: the honest
    // clients' smaller figure wins, and two 12 GiB jobs on a 16 GiB GPU take
    // turns.
    AsUser big(kNobody, [&](FILE* out, int stop) {
        auto c = welcomed(d.socket(), "big", {test_gpu(0, uint64_t{1} << 43)});
        fprintf(out, "%s\n", c ? "welcome" : "refused");
        wait_for_stop(stop);
    });
    ASSERT_EQ(big.line(), "welcome");
    TestClient a(d.socket(), {"--gpu", "0:16G", "--mem", "0=12G", "--cycles", "0"});
    TestClient b(d.socket(), {"--gpu", "0:16G", "--mem", "0=12G", "--cycles", "0"});
    const auto status = d.wait_status([](const nlohmann::json& s) {
        const auto g = Daemon::gpu_by_number(s, 0);
        return g.is_object() && g["requested_memory"] == 24 * kGiB;
    });
    ASSERT_TRUE(status.is_object());
    const auto gpu = Daemon::gpu_by_number(status, 0);
    EXPECT_EQ(gpu["physical_memory"], 16 * kGiB);
    EXPECT_EQ(gpu["capacity"], 16 * kGiB);
    EXPECT_EQ(gpu["serializing"], true);
    a.proceed();
    b.proceed();
}

// A --gpu-info-dir in which the host lists one GPU, test_gpu(0)'s, as the
// NVIDIA driver's /proc files do; returns its UUID.
std::string list_host_gpu(const TempDir& info)
{
    char uuid[kUuidTextSize];
    format_gpu_uuid(test_gpu(0, 0).uuid, uuid);
    std::filesystem::create_directory(info / "0000:01:00.0");
    std::ofstream(info / "0000:01:00.0/information")
        << "Model: \t\t Test GPU\nGPU UUID: \t " << uuid << "\n";
    return uuid;
}

// Issue 47: with the host's NVML, a GPU's size is the host's: another user
// claiming 256 MiB (or 8 TiB) changes neither its size nor its capacity, and
// so nothing any other process sees.
TEST(Untrusted, AClaimChangesNothingOfTheSizeTheHostReports)
{
    require_root();
    TempDir info;
    const std::string uuid = list_host_gpu(info);
    Daemon d;
    Daemon::Config config;
    config.args = {"--gpu-info-dir", info.path()};
    config.env = {{"LD_LIBRARY_PATH", getenv("NVSHARE_TEST_FAKENVML_DIR")},
                  {"FAKENVML_MEMORY", std::string(uuid) + "=" + std::to_string(16 * kGiB)}};
    ASSERT_TRUE(d.start(config));
    EXPECT_NE(d.log().find("memory from NVML"), std::string::npos) << d.log();
    for (const uint64_t lie : {uint64_t{256} << 20, uint64_t{1} << 43}) {
        AsUser liar(kNobody, [&](FILE* out, int stop) {
            auto c = welcomed(d.socket(), "liar", {test_gpu(0, lie)});
            fprintf(out, "%s\n", c ? "welcome" : "refused");
            wait_for_stop(stop);
        });
        ASSERT_EQ(liar.line(), "welcome");
        const auto gpu = Daemon::gpu_by_number(d.status(), 0);
        EXPECT_EQ(gpu["physical_memory"], 16 * kGiB) << lie;
        EXPECT_EQ(gpu["capacity"], 16 * kGiB) << lie;
    }
}

// A daemon that sees GPU 0 through the fake NVML as a 16 GiB GPU whose
// compute processes are listed in `processes`, read at every call that
// takes `delay_ms`.
Daemon::Config nvml_config(const TempDir& info, const std::string& uuid,
                           const std::string& processes, const std::string& mode, int delay_ms = 0)
{
    Daemon::Config config;
    config.args = {"--gpu-info-dir", info.path(), "--anti-thrashing", mode};
    config.env = {{"LD_LIBRARY_PATH", getenv("NVSHARE_TEST_FAKENVML_DIR")},
                  {"FAKENVML_MEMORY", uuid + "=" + std::to_string(16 * kGiB)},
                  {"FAKENVML_PROCESSES", processes},
                  {"FAKENVML_PROCESSES_DELAY_MS", std::to_string(delay_ms)}};
    return config;
}

// Another user reports `pinned` bytes of pinned memory on GPU 0 and says
// its pid; it stays until the test ends.
std::unique_ptr<AsUser> pinning_liar(const Daemon& d, uint64_t pinned)
{
    return std::make_unique<AsUser>(kNobody, [&d, pinned](FILE* out, int stop) {
        auto c = welcomed(d.socket(), "liar", {test_gpu(0, 16 * kGiB)});
        fprintf(out, "%d\n", c && c->report_memory(0, 0, pinned) ? getpid() : 0);
        wait_for_stop(stop);
    });
}

// Issue 47: another user claiming 15 GiB of pinned memory on a 16 GiB GPU
// made every other process's free memory read 0 (and 8 TiB forced turns).
// Now others are told of it only as far as the host's NVML counts memory
// for the process, and no claim counts for more than the GPU.
TEST(Untrusted, PinnedMemoryReachesOthersOnlyAsFarAsNvmlConfirmsIt)
{
    require_root();
    TempDir info;
    const std::string uuid = list_host_gpu(info);
    const std::string processes = info / "processes";
    std::ofstream(processes).flush();
    Daemon d;
    ASSERT_TRUE(d.start(nvml_config(info, uuid, processes, "auto")));
    auto honest = welcomed(d.socket(), "honest", {test_gpu(0, 16 * kGiB)});
    ASSERT_TRUE(honest);
    int pid = 0;
    auto liar_of = [&](const nlohmann::json& s) {
        for (const auto& c : s["clients"])
            if (c["pid"] == pid)
                return c;
        return nlohmann::json();
    };
    std::unique_ptr<AsUser> liar;
    for (const uint64_t lie : {uint64_t{1} << 43, 15 * kGiB}) {
        liar = pinning_liar(d, lie);
        pid = std::stoi("0" + liar->line());
        ASSERT_GT(pid, 0);
        // Two rounds of the daemon's NVML reading (one a second) and more.
        EXPECT_FALSE(honest->expect(MsgType::Unpageable, 2500ms)) << "told of " << lie;
        const auto status = d.status();
        EXPECT_EQ(liar_of(status)["pinned_memory"], std::min(lie, 16 * kGiB));
        EXPECT_EQ(liar_of(status)["confirmed_pinned_memory"], 0u);
        EXPECT_EQ(Daemon::gpu_by_number(status, 0)["requested_memory"], 0u);
        EXPECT_EQ(Daemon::gpu_by_number(status, 0)["serializing"], false);
    }

    // NVML counts 1 GiB for its process: that much is confirmed.
    std::ofstream(processes) << uuid << " " << pid << " " << kGiB << "\n";
    const auto told = honest->expect(MsgType::Unpageable, 5s);
    ASSERT_TRUE(told);
    EXPECT_EQ(told->as<proto::UnpageablePayload>().others_pinned_bytes, kGiB);
    EXPECT_EQ(liar_of(d.status())["confirmed_pinned_memory"], kGiB);
}

// Another user reports `managed` bytes of swappable memory on GPU 0 and says
// its pid; where `request_after` is given, it asks for the GPU that much
// later and says "requested". It stays until the test ends.
std::unique_ptr<AsUser> swappable_claim(const Daemon& d, uint64_t managed,
                                        std::optional<Millis> request_after = std::nullopt)
{
    return std::make_unique<AsUser>(kNobody, [&d, managed, request_after](FILE* out, int stop) {
        auto c = welcomed(d.socket(), "claim", {test_gpu(0, 16 * kGiB)});
        fprintf(out, "%d\n", c && c->report_memory(0, managed) ? getpid() : 0);
        fflush(out);
        if (c && request_after) {
            std::this_thread::sleep_for(*request_after);
            fprintf(out, "%s\n", c->request(1) ? "requested" : "failed");
            fflush(out);
        }
        wait_for_stop(stop);
    });
}

// The status of the client with this pid.
nlohmann::json client_of(const nlohmann::json& status, int pid)
{
    for (const auto& c : status["clients"])
        if (c["pid"] == pid)
            return c;
    return {};
}

// A root process holding GPU 0 with 12 GiB of swappable memory.
std::optional<LockClient> holder_of_12_gib(const Daemon& d)
{
    auto h = welcomed(d.socket(), "holder", {test_gpu(0, 16 * kGiB)});
    if (!h || !h->report_memory(0, 12 * kGiB) || !h->request(1) ||
        !h->expect(MsgType::Grant, kTimeout))
        return std::nullopt;
    return h;
}

// A daemon whose fake NVML lists one host GPU of 16 GiB, with `mode` and a
// time quantum of `tq`, its process list (`processes`) empty at first, and
// a root process holding that GPU with 12 GiB of swappable memory.
struct ClaimsHost {
    TempDir info;
    std::string uuid;
    std::string processes = info / "processes";
    Daemon daemon;
    std::optional<LockClient> holder;

    bool start(const std::string& mode, const std::string& tq)
    {
        uuid = list_host_gpu(info);
        std::ofstream(processes).flush();
        auto config = nvml_config(info, uuid, processes, mode);
        config.args.insert(config.args.end(), {"--time-quantum", tq});
        if (!daemon.start(config))
            return false;
        holder = holder_of_12_gib(daemon);
        return holder.has_value();
    }
};

// The keep allowances (MiB) of the Drop and Contended messages `c` gets
// within `window`.
std::vector<uint32_t> keeps_told(LockClient& c, Millis window)
{
    std::vector<uint32_t> keeps;
    const auto end = std::chrono::steady_clock::now() + window;
    while (std::chrono::steady_clock::now() < end) {
        const auto f = c.receive(
            std::chrono::duration_cast<Millis>(end - std::chrono::steady_clock::now() + 1ms));
        if (!f)
            break;
        if (f->type == MsgType::Drop)
            keeps.push_back(f->as<proto::DropPayload>().keep_mib);
        else if (f->type == MsgType::Contended)
            keeps.push_back(f->as<proto::GrantPayload>().keep_mib);
    }
    return keeps;
}

// Issue 47: another user claiming 12 GiB of swappable memory it does not
// have (NVML counts nothing for it, its host memory is small) forced turns
// on a 16 GiB GPU whose holder uses 12 GiB, and its request made the holder
// leave only 4 GiB there. Now the claim counts for others for its grace
// alone (15 s): then the holder runs in no turns and keeps everything when
// the claimer asks for the GPU.
TEST(Untrusted, UnconfirmedSwappableMemoryCountsForOthersOnlyForItsGrace)
{
    require_root();
    ClaimsHost host;
    ASSERT_TRUE(host.start("auto", "2s"));
    const Daemon& d = host.daemon;
    auto& holder = host.holder;
    const auto liar = swappable_claim(d, 12 * kGiB, 18s);
    const int pid = std::stoi("0" + liar->line());
    ASSERT_GT(pid, 0);
    auto status = d.status();
    EXPECT_EQ(Daemon::gpu_by_number(status, 0)["serializing"], true) << "within its grace";
    EXPECT_EQ(client_of(status, pid)["confirmed_memory"], 12 * kGiB);
    ASSERT_EQ(liar->line(), "requested");  // its grace and a reading of the host's figures after
    status = d.status();
    EXPECT_EQ(Daemon::gpu_by_number(status, 0)["requested_memory"],
              12 * kGiB + client_of(status, pid)["confirmed_memory"].get<uint64_t>());
    EXPECT_LT(client_of(status, pid)["confirmed_memory"], kGiB);
    EXPECT_EQ(client_of(status, pid)["memory"], 12 * kGiB);
    EXPECT_EQ(Daemon::gpu_by_number(status, 0)["serializing"], false);
    const auto keeps = keeps_told(*holder, 4s);
    ASSERT_FALSE(keeps.empty()) << "the holder was not told the claimer waits";
    for (const uint32_t keep : keeps)
        EXPECT_EQ(keep, proto::kKeepEverything);
}

// A user whose process ended owing its grace (claimed 12 GiB the host never
// confirmed) gets no new grace on that GPU from another connection: the
// second claim counts for others as the host confirms it (its small host
// memory) as soon as the host has read it, not for another 15 s.
TEST(Untrusted, ReconnectingBuysNoNewGrace)
{
    require_root();
    ClaimsHost host;
    ASSERT_TRUE(host.start("auto", "2s"));
    const Daemon& d = host.daemon;
    {
        // It stays 3 s: the host's figures are read every second, and it
        // owes its grace once they were.
        const auto liar = swappable_claim(d, 12 * kGiB, 3s);
        const int pid = std::stoi("0" + liar->line());
        ASSERT_GT(pid, 0);
        EXPECT_EQ(Daemon::gpu_by_number(d.status(), 0)["serializing"], true) << "its grace";
        ASSERT_EQ(liar->line(), "requested");
        EXPECT_EQ(client_of(d.status(), pid)["confirmed_memory"], 12 * kGiB) << "its grace";
    }
    const auto again = swappable_claim(d, 12 * kGiB);
    const int pid = std::stoi("0" + again->line());
    ASSERT_GT(pid, 0);
    nlohmann::json status;
    EXPECT_TRUE(wait_until(
        [&] {
            status = d.status();
            return client_of(status, pid)["confirmed_memory"] < kGiB &&
                   Daemon::gpu_by_number(status, 0)["serializing"] == false;
        },
        3s))
        << status.dump();
}

// An honest process of another user whose swappable memory the host
// confirms (here NVML's count for it) counts after its grace as before.
TEST(Untrusted, ConfirmedSwappableMemoryCountsAfterItsGrace)
{
    require_root();
    ClaimsHost host;
    ASSERT_TRUE(host.start("auto", "2s"));
    const Daemon& d = host.daemon;
    auto& holder = host.holder;
    const auto honest = swappable_claim(d, 12 * kGiB, 18s);
    const int pid = std::stoi("0" + honest->line());
    ASSERT_GT(pid, 0);
    std::ofstream(host.processes) << host.uuid << " " << pid << " " << 12 * kGiB << "\n";
    ASSERT_EQ(honest->line(), "requested");
    const auto status = d.status();
    EXPECT_EQ(client_of(status, pid)["confirmed_memory"], 12 * kGiB);
    EXPECT_EQ(Daemon::gpu_by_number(status, 0)["requested_memory"], 24 * kGiB);
    EXPECT_EQ(Daemon::gpu_by_number(status, 0)["serializing"], true);
    const auto keeps = keeps_told(*holder, 4s);
    ASSERT_FALSE(keeps.empty());
    EXPECT_EQ(keeps.front(), 4096u);  // room for its 12 GiB
}

// No swappable claim counts for more than the GPU: 8 TiB of root's counts
// as 16 GiB, and alone it forces no turns.
TEST(Untrusted, ASwappableClaimBeyondTheGpuCountsAsTheGpu)
{
    require_root();
    TempDir info;
    const std::string uuid = list_host_gpu(info);
    Daemon d;
    ASSERT_TRUE(d.start(nvml_config(info, uuid, info / "processes", "auto")));
    auto c = welcomed(d.socket(), "big", {test_gpu(0, 16 * kGiB)});
    ASSERT_TRUE(c && c->report_memory(0, uint64_t{1} << 43));
    const auto status = d.status();
    EXPECT_EQ(Daemon::gpu_by_number(status, 0)["requested_memory"], 16 * kGiB);
    EXPECT_EQ(Daemon::gpu_by_number(status, 0)["serializing"], false);
}

// An honest newcomer's memory waits for its turn where the host cannot see
// it: its claim counts for others while it waits (here past its 15 s of
// grace, the holder's quantum being 20 s), so the holder leaves it room.
TEST(Untrusted, ANewcomersUnconfirmedClaimGetsItsRoomWhileItWaits)
{
    require_root();
    ClaimsHost host;
    ASSERT_TRUE(host.start("on", "20s"));
    const Daemon& d = host.daemon;
    auto& holder = host.holder;
    const auto newcomer = swappable_claim(d, 12 * kGiB, 0ms);
    ASSERT_GT(std::stoi("0" + newcomer->line()), 0);
    ASSERT_EQ(newcomer->line(), "requested");
    const auto drop = holder->expect(MsgType::Drop, 25s);
    ASSERT_TRUE(drop);
    EXPECT_EQ(drop->as<proto::DropPayload>().keep_mib, 4096u);
}

// NVML is read off the event loop: a driver that takes 5 s to list a GPU's
// processes delays no hand-over of the lock, nor the daemon's exit.
TEST(Untrusted, ASlowNvmlDelaysNoHandOver)
{
    require_root();
    TempDir info;
    const std::string uuid = list_host_gpu(info);
    Daemon d;
    ASSERT_TRUE(d.start(nvml_config(info, uuid, info / "processes", "on", 5000)));
    auto a = welcomed(d.socket(), "alpha", {test_gpu(0, 16 * kGiB)});
    auto b = welcomed(d.socket(), "beta", {test_gpu(0, 16 * kGiB)});
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->request(1));
    ASSERT_TRUE(a->expect(MsgType::Grant, kTimeout));
    const auto quiet = handovers(*a, *b, 50);
    ASSERT_EQ(quiet.size(), 50u);
    const auto liar = pinning_liar(d, kGiB);  // the daemon starts reading NVML
    ASSERT_GT(std::stoi("0" + liar->line()), 0);
    const auto t0 = std::chrono::steady_clock::now();
    const auto slow = handovers(*a, *b, 200);
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_EQ(slow.size(), 200u);
    const double slowest = *std::max_element(slow.begin(), slow.end());
    printf("hand-over median %.0f us quiet, %.0f us (max %.0f us) while NVML answers in 5 s\n",
           median(quiet), median(slow), slowest);
    EXPECT_GE(took, 1s) << "the hand-overs did not overlap a reading";
    EXPECT_LE(median(slow), 2 * median(quiet) + 10000.0);
    EXPECT_LE(slowest, 500'000.0);
    // Nor does stopping wait for a reading under way (each takes 5 s).
    const auto stopping = std::chrono::steady_clock::now();
    EXPECT_EQ(d.stop(), 0);
    EXPECT_LE(std::chrono::steady_clock::now() - stopping, 1500ms);
}

TEST(Untrusted, MemoryReportThatWouldWrapIsRefused)
{
    Daemon d;
    ASSERT_TRUE(d.start());
    TestClient a(d.socket(), {"--gpu", "0:16G", "--mem", "0=12G", "--cycles", "0"});
    TestClient b(d.socket(), {"--gpu", "0:16G", "--mem", "0=12G", "--cycles", "0"});
    ASSERT_TRUE(d.wait_status([](const nlohmann::json& s) {
                     return Daemon::gpu_by_number(s, 0)["requested_memory"] == 24 * kGiB;
                 }).is_object());
    auto liar = welcomed(d.socket(), "liar", {test_gpu(0, 16 * kGiB)});
    ASSERT_TRUE(liar);
    // 2^64 - 24 GiB: added to the others' 24 GiB, it once wrapped to 0.
    ASSERT_TRUE(liar->report_memory(0, 0 - 24 * kGiB));
    const auto e = error_of(*liar);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->first, static_cast<uint32_t>(ErrorCode::BadValue));
    const auto gpu = Daemon::gpu_by_number(d.status(), 0);
    EXPECT_EQ(gpu["requested_memory"], 24 * kGiB);
    EXPECT_EQ(gpu["serializing"], true);
    a.proceed();
    b.proceed();
}

TEST(Untrusted, SwapTimeClaimStretchesTheQuantumOnlyToTheCeiling)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on", "--time-quantum", "300ms", "--quantum-ceiling",
                         "1s", "--grace", "20s"}));
    auto holder = welcomed(d.socket(), "holder", {test_gpu(0, 16 * kGiB)});
    ASSERT_TRUE(holder);
    ASSERT_TRUE(holder->request(1));
    ASSERT_TRUE(holder->expect(MsgType::Grant, kTimeout));
    // One swap-in of 100 s claimed: ten times that would hold the GPU for
    // over a quarter of an hour.
    proto::StatsPayload st{};
    st.swap_ins = 1;
    st.swap_in_us = 100000000;
    ASSERT_TRUE(holder->send(MsgType::Stats, &st, sizeof st));
    TestClient waiter(d.socket(), {});
    ASSERT_TRUE(waiter.wait_for("request"));
    const auto asked = std::chrono::steady_clock::now();
    ASSERT_TRUE(holder->expect(MsgType::Drop, 15s)) << "the claim held the GPU";
    EXPECT_LT(std::chrono::steady_clock::now() - asked, 5s);
    ASSERT_TRUE(holder->release(1));
    EXPECT_EQ(waiter.finish(), 0);

    // A claim past the bounds is refused outright.
    st.swap_ins = 2;
    st.swap_in_us = UINT64_MAX;
    ASSERT_TRUE(holder->send(MsgType::Stats, &st, sizeof st));
    const auto e = error_of(*holder);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->first, static_cast<uint32_t>(ErrorCode::BadValue));
}

TEST(Untrusted, MadeUpGpusDoNotFillTheTable)
{
    require_root();
    TempDir info;
    list_host_gpu(info);
    Daemon d;
    ASSERT_TRUE(d.start({"--gpu-info-dir", info.path()}));
    AsUser attacker(kNobody, [&](FILE* out, int stop) {
        std::vector<LockClient> held;
        int refused = 0;
        for (int i = 0; i < 64; ++i) {
            auto c =
                welcomed(d.socket(), "fake", {test_gpu(static_cast<uint8_t>(100 + i), 16 * kGiB)});
            if (c)
                held.push_back(std::move(*c));
            else
                ++refused;
        }
        fprintf(out, "%zu %d\n", held.size(), refused);
        wait_for_stop(stop);
    });
    EXPECT_EQ(attacker.line(), "4 60") << "made-up GPUs accepted, refused";
    // Another user's clients: the host's GPU, and one GPU of their own.
    AsUser other(1001, [&](FILE* out, int stop) {
        auto real = welcomed(d.socket(), "real", {test_gpu(0, 16 * kGiB)});
        auto own = welcomed(d.socket(), "own", {test_gpu(7, 16 * kGiB)});
        fprintf(out, "%s %s\n", real ? "welcome" : "refused", own ? "welcome" : "refused");
        wait_for_stop(stop);
    });
    EXPECT_EQ(other.line(), "welcome welcome");
    EXPECT_EQ(d.status()["gpus"].size(), 6u);
}

// ---- status
// --------------------------------------------------------------------------------------

// Raises this process's open-files limit to its hard limit, and returns it.
rlim_t raise_open_files()
{
    rlimit files{};
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    return files.rlim_cur;
}

// `count` clients of GPU 0 named `prefix` and their number, registered
// and kept in `clients` (a status of that many).
void register_clients(const Daemon& d, int count, const std::string& prefix,
                      std::vector<LockClient>& clients)
{
    for (int i = 0; i < count; ++i) {
        auto c = welcomed(d.socket(), prefix + std::to_string(i), {test_gpu(0, 16 * kGiB)});
        ASSERT_TRUE(c) << "client " << i;
        clients.push_back(std::move(*c));
    }
}

TEST(Untrusted, StatusOfTwoThousandClientsArrivesWhole)
{
    if (const auto limit = raise_open_files(); limit < 4500)
        GTEST_SKIP() << "the open-files limit (" << limit << ") is below 4500";
    Daemon d;
    ASSERT_TRUE(d.start());
    std::vector<LockClient> clients;
    ASSERT_NO_FATAL_FAILURE(register_clients(d, 2000, "client", clients));
    std::string error;
    const std::string text = LockClient::query_status(d.socket(), &error);
    ASSERT_FALSE(text.empty()) << error;
    EXPECT_GT(text.size(), size_t{256} << 10);
    const auto status = nlohmann::json::parse(text);
    EXPECT_EQ(status["clients"].size(), 2000u);
    EXPECT_EQ(status["clients_omitted"], 0);
}

TEST(Untrusted, StatusFloodIsRateLimitedAndOthersAreServed)
{
    require_root();
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on"}));
    constexpr auto kFlood = 2s;
    AsUser flooder(kNobody, [&](FILE* out, int stop) {
        std::vector<LockClient> conns(8);
        std::string error;
        for (auto& c : conns)
            c.connect(d.socket(), &error);
        const auto start = std::chrono::steady_clock::now();
        int answered = 0;
        while (std::chrono::steady_clock::now() - start < kFlood) {
            for (auto& c : conns)
                c.send(MsgType::StatusQuery, nullptr, 0);
            for (auto& c : conns)
                answered += c.expect(MsgType::Status, 500ms) ? 1 : 0;
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        fprintf(out, "%d %.3f\n", answered, seconds);
        wait_for_stop(stop);
    });
    // Meanwhile another user's client takes and gives back the lock.
    TestClient other(d.socket(), {"--cycles", "5"}, 1001);
    EXPECT_EQ(other.finish(), 0) << other.transcript();
    const auto grants = other.events_named("grant");
    const auto requests = other.events_named("request");
    ASSERT_EQ(grants.size(), 5u);
    for (size_t i = 0; i < grants.size(); ++i)
        EXPECT_LT(grants[i].ns - requests[i].ns, 1000000000u) << "grant " << i;
    int answered = 0;
    double seconds = 0;
    ASSERT_EQ(sscanf(flooder.line().c_str(), "%d %lf", &answered, &seconds), 2);
    // At most the burst plus the rate over the time it ran (and one round of
    // eight in flight as it ended); before the limit this was thousands.
    EXPECT_GE(answered, 20);
    EXPECT_LE(answered, 20 + 20 * seconds + 8) << "in " << seconds << " s";
}

// Another user opens connections in bursts of 2,000 and closes them, as
// fast as the socket takes them (at the same CPU priority as the daemon):
// that user's connections beyond its rate are refused as they are accepted,
// and a round of accepts mostly refused rests the listener, so the lock
// still changes hands at its usual speed (issue 47 item 6; before, the
// median hand-over grew to 10-20 ms on a shared 2-core machine). A new
// client of another user still gets in, behind the storm in the backlog.
TEST(Untrusted, ConnectionStormsLeaveTheLockServed)
{
    require_root();
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on"}));
    auto a = welcomed(d.socket(), "alpha", {test_gpu(1, 16 * kGiB)});
    auto b = welcomed(d.socket(), "beta", {test_gpu(1, 16 * kGiB)});
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->request(1));
    ASSERT_TRUE(a->expect(MsgType::Grant, kTimeout));

    // One measurement: 100 hand-overs quiet, then 100 under the storm, and
    // a new client's welcome during it.
    struct Run {
        std::vector<double> quiet, loaded;
        uint64_t made = 0;
        bool welcomed = false;
        double welcome_ms = 0;
    };
    const auto measure = [&] {
        Run r;
        r.quiet = handovers(*a, *b, 100);
        AsUser storm(kNobody, [&](FILE* out, int stop) {
            fcntl(stop, F_SETFL, O_NONBLOCK);
            sockaddr_un addr{};
            addr.sun_family = AF_UNIX;
            snprintf(addr.sun_path, sizeof addr.sun_path, "%s", d.socket().c_str());
            uint64_t made = 0;
            char byte;
            std::vector<int> fds;
            while (read(stop, &byte, 1) < 0 && errno == EAGAIN) {
                for (int i = 0; i < 2000; ++i) {
                    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                    if (fd < 0)
                        break;
                    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
                        fds.push_back(fd);
                        ++made;
                    } else {
                        close(fd);
                    }
                }
                for (int fd : fds)
                    close(fd);
                fds.clear();
            }
            fprintf(out, "%llu\n", static_cast<unsigned long long>(made));
        });
        std::this_thread::sleep_for(300ms);  // the storm under way
        r.loaded = handovers(*a, *b, 100);
        const auto connecting = std::chrono::steady_clock::now();
        r.welcomed = static_cast<bool>(welcomed(d.socket(), "gamma", {test_gpu(1, 16 * kGiB)}));
        r.welcome_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - connecting)
                .count();
        storm.finish();
        r.made = std::stoull("0" + storm.line());
        return r;
    };
    // Within twice the quiet median, and 100 us for the jitter of a shared
    // machine's scheduler (the medians of quiet runs alone vary by tens of
    // microseconds). Other work on the machine can slow one measurement
    // whole: up to three are taken, and one within the bound passes; a
    // daemon that the storm slows fails each. The maximum is the CPU's: the
    // storm takes one of them.
    Run r;
    for (int attempt = 0; attempt < 3; ++attempt) {
        r = measure();
        ASSERT_EQ(r.quiet.size(), 100u);
        ASSERT_EQ(r.loaded.size(), 100u);
        printf(
            "hand-over median %.0f us quiet, %.0f us (max %.0f us) under a storm of %llu "
            "connections; a new client welcomed in %.1f ms\n",
            median(r.quiet), median(r.loaded), *std::max_element(r.loaded.begin(), r.loaded.end()),
            static_cast<unsigned long long>(r.made), r.welcome_ms);
        if (median(r.loaded) <= 2 * median(r.quiet) + 100.0)
            break;
    }
    EXPECT_GT(r.made, 2000u);
    EXPECT_LE(median(r.loaded), 2 * median(r.quiet) + 100.0);
    EXPECT_LE(*std::max_element(r.loaded.begin(), r.loaded.end()), 1'000'000.0);
    EXPECT_TRUE(r.welcomed) << "a new client was not welcomed during the storm";
}

// Another user opens connections one after another and closes them: beyond
// the burst and the rate, a connection is answered with an Error frame that
// says why, and closed.
TEST(Untrusted, ConnectionsBeyondTheUsersRateAreRefused)
{
    require_root();
    Daemon d;
    ASSERT_TRUE(d.start());
    AsUser opener(kNobody, [&](FILE* out, int) {
        std::string error;
        for (int i = 0; i < 1100; ++i) {
            LockClient c;
            if (!c.connect(d.socket(), &error))
                break;
        }
        LockClient last;
        if (!last.connect(d.socket(), &error)) {
            fprintf(out, "not connected: %s\n", error.c_str());
            return;
        }
        const auto e = error_of(last);
        fprintf(out, "%u %s\n", e ? e->first : 0u, e ? e->second.c_str() : "no error");
    });
    const std::string line = opener.line();
    opener.finish();
    EXPECT_EQ(line.substr(0, line.find(' ')),
              std::to_string(static_cast<uint32_t>(ErrorCode::Refused)))
        << line;
    EXPECT_NE(line.find("opens connections faster than 100 a second"), std::string::npos) << line;
    // Root, and the lock, are still served.
    EXPECT_TRUE(welcomed(d.socket(), "root", {test_gpu(1, 16 * kGiB)}));
    EXPECT_NE(d.log().find("refused a connection of pid"), std::string::npos);
}

// Another user's 64 connections each ask for a status of about 0.5 MiB and
// never read it (issue 47: 28 uids doing so drove nvshared to 1.74 GB).
// What one user's connections left unread makes their next status wait
// (from 4 MiB on), and a connection that reads nothing for 10 s is
// disconnected, its buffer freed.
TEST(Untrusted, StatusesLeftUnreadAreBoundedAndDropped)
{
    require_root();
    if (const auto limit = raise_open_files(); limit < 2500)
        GTEST_SKIP() << "the open-files limit (" << limit << ") is below 2500";
    Daemon d;
    ASSERT_TRUE(d.start());
    std::vector<LockClient> clients;
    ASSERT_NO_FATAL_FAILURE(register_clients(d, 1000, "client-with-a-long-name-", clients));
    std::string error;
    const size_t status_size = LockClient::query_status(d.socket(), &error).size();
    ASSERT_GT(status_size, size_t{400} << 10) << error;
    const long before = static_cast<long>(resident_kib(d.pid()));
    AsUser hoarder(kNobody, [&](FILE* out, int stop) {
        std::vector<LockClient> conns(64);
        for (auto& c : conns) {
            c.connect(d.socket(), &error);
            c.send(MsgType::StatusQuery, nullptr, 0);
        }
        fprintf(out, "asked\n");
        wait_for_stop(stop);  // never reading
    });
    ASSERT_EQ(hoarder.line(), "asked");
    std::this_thread::sleep_for(2s);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizers' shadow memory (and ASan's quarantine) grow RSS by
    // design; LeakSanitizer checks the daemon at its exit instead.
    (void)before;
    printf("status of %zu KiB; RSS not compared in a sanitizer build\n", status_size >> 10);
#else
    const long growth_kib = static_cast<long>(resident_kib(d.pid())) - before;
    printf("status of %zu KiB; 64 asked and unread: the daemon grew by %ld KiB\n",
           status_size >> 10, growth_kib);
    // About 4 MiB left unread, the status in progress and the allocator's
    // slack (before: every status, 27 MiB).
    EXPECT_LT(growth_kib, 4 * 1024 + 2 * static_cast<long>(status_size >> 10) + 4096);
#endif
    // Within the unread limit and a round of the timers, they are gone
    // (those whose Hello deadline came with more than 256 KiB unread went
    // then, for not reading their messages). The bound is a hang's, not
    // the limit's: a sanitizer build on a loaded machine serves the 1000
    // clients' statuses many times slower than the timers' round.
    const auto asked_at = std::chrono::steady_clock::now();
    EXPECT_TRUE(wait_until(
        [&] {
            std::string e;
            const std::string text = LockClient::query_status(d.socket(), &e);
            return !text.empty() && nlohmann::json::parse(text)["connections"] == 1001;
        },
        60s))
        << d.log();
    printf("the 64 unread connections were gone %lld ms after the wait began\n",
           static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - asked_at)
                                      .count()));
}

// ---- files
// -----------------------------------------------------------------------------------------

TEST(UntrustedFiles, StateFileThatIsAFifoDoesNotHangTheStart)
{
    TempDir state;
    ASSERT_EQ(mkfifo((state / "state.json").c_str(), 0600), 0);
    Daemon d;
    ASSERT_TRUE(d.start({"--state-dir", state.path()}));  // READY=1 within the timeout
    EXPECT_NE(d.log().find("not a regular file"), std::string::npos) << d.log();
}

TEST(UntrustedFiles, ConfigLinkedToDevZeroIsRefusedAtOnce)
{
    TempDir etc;
    std::filesystem::create_symlink("/dev/zero", etc / "nvshare.conf");
    Daemon d;
    Daemon::Config config;
    config.args = {"--config", etc / "nvshare.conf"};
    config.wait_ready = false;
    ASSERT_TRUE(d.start(config));
    EXPECT_EQ(d.process().wait(kTimeout), 1) << d.log();
    EXPECT_NE(d.log().find("not a regular file"), std::string::npos) << d.log();
}

}  // namespace
}  // namespace nvshare::test
