// Bad input on the lock socket: a malformed, oversized or out-of-order frame
// gets that client an Error frame and a disconnect, and everybody else carries
// on. Slow, silent and stuck clients never hold up the loop.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/lock_client.h"
#include "tests/integration/frames.h"
#include "tests/integration/test_client.h"
#include "tests/integration/unix_socket.h"
#include "tests/support/daemon.h"
#include "tests/support/process.h"
#include "tests/support/test_gpu.h"
#include "tests/support/wait.h"
#include "tests/support/welcomed.h"

namespace nvshare::test {
namespace {

using proto::ErrorCode;
using proto::MsgType;

LockClient connect_to(const Daemon& d)
{
    LockClient c;
    std::string error;
    EXPECT_TRUE(c.connect(d.socket(), &error)) << error;
    return c;
}

// A registered raw client (Hello answered by Welcome).
LockClient registered(const Daemon& d, const std::vector<GpuSpec>& gpus = {test_gpu(0, 1 << 30)})
{
    auto c = welcomed(d.socket(), "raw", gpus);
    EXPECT_TRUE(c.has_value());
    return c ? std::move(*c) : LockClient{};
}

// The honest parties of every bad-input test: one client that holds the
// lock throughout, and proof that new clients are still served.
class BadInput : public testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_TRUE(daemon_.start({"--anti-thrashing", "on"}));
        holder_ = std::make_unique<TestClient>(daemon_.socket(),
                                               std::vector<std::string>{"--hold-until-stdin"});
        ASSERT_TRUE(holder_->wait_for("grant"));
    }

    void expect_others_unaffected()
    {
        // A newcomer registers and queues behind the holder...
        TestClient newcomer(daemon_.socket(), {});
        ASSERT_FALSE(daemon_.wait_client_state(newcomer.pid(), "waiting").is_null())
            << newcomer.transcript();
        // ...and the holder kept its lock all along, then hands it over.
        EXPECT_FALSE(daemon_.wait_client_state(holder_->pid(), "holding").is_null());
        holder_->proceed();
        EXPECT_EQ(holder_->finish(), 0) << holder_->transcript();
        EXPECT_TRUE(holder_->events_named("revoked").empty());
        EXPECT_TRUE(holder_->events_named("drop").empty());
        EXPECT_EQ(newcomer.finish(), 0);
        EXPECT_TRUE(daemon_.process().running());
        EXPECT_EQ(daemon_.stop(), 0);
    }

    // Sends bytes, expects an Error with this code (and text), then EOF.
    void expect_error(LockClient& c, const Bytes& bytes, ErrorCode code,
                      const std::string& text_part = {})
    {
        ASSERT_TRUE(c.send_raw(bytes.data(), bytes.size()));
        const auto f = c.expect(MsgType::Error, kTimeout);
        ASSERT_TRUE(f) << "no Error frame";
        EXPECT_EQ(f->as<proto::ErrorFixed>().code, static_cast<uint32_t>(code))
            << f->text(sizeof(proto::ErrorFixed));
        EXPECT_NE(f->text(sizeof(proto::ErrorFixed)).find(text_part), std::string::npos)
            << f->text(sizeof(proto::ErrorFixed));
        EXPECT_FALSE(c.receive(kTimeout));
        EXPECT_TRUE(c.eof()) << "the daemon did not close the connection";
    }

    Daemon daemon_;
    std::unique_ptr<TestClient> holder_;
};

// ---- frames refused before Hello ---------------------------------------------------

struct Garbage {
    const char* name;
    Bytes bytes;
    ErrorCode code;
    std::string text;
};

class GarbageFrame : public BadInput, public testing::WithParamInterface<Garbage> {};

TEST_P(GarbageFrame, GetsAnErrorAndADisconnect)
{
    LockClient bad = connect_to(daemon_);
    expect_error(bad, GetParam().bytes, GetParam().code, GetParam().text);
    expect_others_unaffected();
}

const uint16_t kRequest = static_cast<uint16_t>(MsgType::Request);

INSTANTIATE_TEST_SUITE_P(
    Unregistered, GarbageFrame,
    testing::Values(
        Garbage{"BadMagic", header(0x50545448u, 1, 5, 0), ErrorCode::BadMagic, "magic"},
        Garbage{"HttpRequest",
                Bytes{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1', '\r',
                      '\n', '\r', '\n'},
                ErrorCode::BadMagic, "magic"},
        Garbage{"BadVersion", header(proto::kMagic, 7, 5, 0), ErrorCode::BadVersion,
                "protocol version 7"},
        Garbage{"JustOverTheLimit",
                header(proto::kMagic, 1, kRequest, proto::kMaxClientPayload + 1),
                ErrorCode::TooLarge, "4097"},
        Garbage{"FourGiBLength", header(proto::kMagic, 1, kRequest, 0xffffffffu),
                ErrorCode::TooLarge, "4294967295"},
        Garbage{"UnknownType", frame(uint16_t{99}), ErrorCode::BadType, "unknown message type 99"},
        Garbage{"TypeZero", frame(uint16_t{0}), ErrorCode::BadType, "unknown"},
        Garbage{"RequestBeforeHello", frame(MsgType::Request, mask_payload(1)), ErrorCode::BadOrder,
                "Hello"},
        Garbage{"ReleasedBeforeHello", frame(MsgType::Released, mask_payload(1)),
                ErrorCode::BadOrder, "Hello"},
        Garbage{"MemoryBeforeHello",
                frame(MsgType::Memory, bytes_of(proto::MemoryPayload{0, 0, 1, 0})),
                ErrorCode::BadOrder, "Hello"},
        Garbage{"RequestTooShort", frame(MsgType::Request, Bytes(4)), ErrorCode::BadLength,
                "must carry 8 bytes, not 4"},
        Garbage{"StatusQueryWithPayload", frame(MsgType::StatusQuery, Bytes(3)),
                ErrorCode::BadLength, "not 3"},
        Garbage{"HelloCountAboveItsRecords",
                frame(MsgType::Hello, hello_payload({test_gpu(0, 1 << 30)}, 2)),
                ErrorCode::BadLength, "Hello"},
        Garbage{"HelloCountBelowItsRecords",
                frame(MsgType::Hello, hello_payload({test_gpu(0, 1), test_gpu(1, 1)}, 1)),
                ErrorCode::BadLength, "Hello"},
        Garbage{"HelloWithHugeCount",
                frame(MsgType::Hello, hello_payload({test_gpu(0, 1)}, 0x80000001u)),
                ErrorCode::BadLength, "Hello"},
        Garbage{"HelloShorterThanItsFixedPart", frame(MsgType::Hello, Bytes(10)),
                ErrorCode::BadLength, "Hello"},
        Garbage{"HelloNamingAGpuTwice",
                frame(MsgType::Hello, hello_payload({test_gpu(3, 1 << 30), test_gpu(3, 1 << 30)})),
                ErrorCode::BadValue, "twice"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// Every daemon-to-client type, sent by a client, with a plausible payload.
class DaemonOnlyType : public BadInput, public testing::WithParamInterface<MsgType> {};

TEST_P(DaemonOnlyType, IsRefused)
{
    LockClient bad = registered(daemon_);
    uint32_t size = 16;
    proto::fixed_payload_size(GetParam(), &size);
    expect_error(bad, frame(GetParam(), Bytes(size)), ErrorCode::BadType, "not sent by clients");
    expect_others_unaffected();
}

INSTANTIATE_TEST_SUITE_P(Types, DaemonOnlyType,
                         testing::Values(MsgType::Welcome, MsgType::Grant, MsgType::Drop,
                                         MsgType::Revoked, MsgType::Settings, MsgType::Contended,
                                         MsgType::Status, MsgType::Error),
                         [](const auto& param_info) {
                             return "Type" + std::to_string(static_cast<int>(param_info.param));
                         });

// ---- frames refused after Hello ------------------------------------------------------

TEST_F(BadInput, SecondHello)
{
    LockClient c = registered(daemon_);
    expect_error(c, frame(MsgType::Hello, hello_payload({test_gpu(0, 1 << 30)})),
                 ErrorCode::BadOrder, "second Hello");
    expect_others_unaffected();
}

TEST_F(BadInput, MaskNamingAnUnregisteredGpu)
{
    LockClient c = registered(daemon_);
    expect_error(c, frame(MsgType::Request, mask_payload(0b10)), ErrorCode::BadValue, "GPU");
    expect_others_unaffected();
}

TEST_F(BadInput, MemoryReportForAnUnknownGpu)
{
    LockClient c = registered(daemon_);
    expect_error(c, frame(MsgType::Memory, bytes_of(proto::MemoryPayload{5, 0, 1, 0})),
                 ErrorCode::BadValue, "unknown GPU");
    expect_others_unaffected();
}

TEST_F(BadInput, GarbageFromAWaiterTakesItOutOfTheQueue)
{
    LockClient c = registered(daemon_);
    ASSERT_TRUE(c.request(1));
    ASSERT_TRUE(
        daemon_
            .wait_status([](const nlohmann::json& s) { return s["gpus"][0]["queue"].size() == 1; })
            .is_object());
    expect_error(c, frame(uint16_t{1234}), ErrorCode::BadType);
    ASSERT_TRUE(
        daemon_.wait_status([](const nlohmann::json& s) { return s["gpus"][0]["queue"].empty(); })
            .is_object());
    expect_others_unaffected();
}

TEST_F(BadInput, GarbageFromTheHolderFreesTheLock)
{
    // A second daemon-side view: the holder itself misbehaves.
    LockClient c = connect_to(daemon_);
    holder_->proceed();
    ASSERT_EQ(holder_->finish(), 0);
    ASSERT_TRUE(c.hello("raw", {test_gpu(0, 1 << 30)}));
    ASSERT_TRUE(c.request(1));
    ASSERT_TRUE(c.expect(MsgType::Grant, kTimeout));
    TestClient waiter(daemon_.socket(), {});
    ASSERT_FALSE(daemon_.wait_client_state(waiter.pid(), "waiting").is_null());
    expect_error(c, header(proto::kMagic, 2, 3, 8), ErrorCode::BadVersion, "version 2");
    EXPECT_TRUE(waiter.wait_for("grant"));
    EXPECT_EQ(waiter.finish(), 0);
}

TEST_F(BadInput, FourGiBLengthDoesNotMakeTheDaemonAllocate)
{
    const size_t before = resident_kib(daemon_.process().pid());
    for (int i = 0; i < 20; ++i) {
        LockClient bad = connect_to(daemon_);
        // The header alone, then a little of the promised payload.
        const Bytes bytes = header(proto::kMagic, 1, kRequest, 0xfffffff0u) + Bytes(64, 0xab);
        ASSERT_TRUE(bad.send_raw(bytes.data(), bytes.size()));
        const auto f = bad.expect(MsgType::Error, kTimeout);
        ASSERT_TRUE(f);
        EXPECT_EQ(f->as<proto::ErrorFixed>().code, static_cast<uint32_t>(ErrorCode::TooLarge));
    }
    const size_t after = resident_kib(daemon_.process().pid());
    EXPECT_LT(after, before + 4096)
        << "resident memory grew from " << before << " to " << after << " KiB";
    expect_others_unaffected();
}

// ---- unusual but valid framing --------------------------------------------------------

TEST_F(BadInput, FrameSplitByteByByteWorks)
{
    LockClient c = connect_to(daemon_);
    holder_->proceed();
    ASSERT_EQ(holder_->finish(), 0);
    const Bytes bytes = frame(MsgType::Hello, hello_payload({test_gpu(0, 1 << 30)})) +
                        frame(MsgType::Request, mask_payload(1));
    for (uint8_t b : bytes) {
        ASSERT_TRUE(c.send_raw(&b, 1));
        // One byte at a time really reaches the daemon as one byte at a time.
        ASSERT_TRUE(wait_drained(c.fd()));
    }
    ASSERT_TRUE(c.expect(MsgType::Welcome, kTimeout));
    const auto grant = c.expect(MsgType::Grant, kTimeout);
    ASSERT_TRUE(grant);
    EXPECT_EQ(grant->as<proto::GrantPayload>().gpus, 1u);
}

TEST_F(BadInput, ManyFramesInOneWriteWork)
{
    holder_->proceed();
    ASSERT_EQ(holder_->finish(), 0);
    LockClient c = connect_to(daemon_);
    const Bytes bytes =
        frame(MsgType::Hello, hello_payload({test_gpu(0, 1 << 30), test_gpu(1, 1 << 30)})) +
        frame(MsgType::Memory, bytes_of(proto::MemoryPayload{1, 0, 12345, 0})) +
        frame(MsgType::Request, mask_payload(0b10)) + frame(MsgType::StatusQuery) +
        frame(MsgType::Released, mask_payload(0b10)) + frame(MsgType::StatusQuery);
    ASSERT_TRUE(c.send_raw(bytes.data(), bytes.size()));
    // Welcome comes first. The scheduler's answers are sent once the whole
    // batch is read: by then the client's own Released has ended the hold,
    // so no Grant comes after it (issue 47: one did).
    std::vector<MsgType> types;
    std::vector<std::string> statuses;
    while (statuses.size() < 2) {
        const auto f = c.receive(kTimeout);
        ASSERT_TRUE(f);
        if (f->type == MsgType::Contended)
            continue;
        types.push_back(f->type);
        if (f->type == MsgType::Status)
            statuses.push_back(f->text());
    }
    while (const auto f = c.receive(std::chrono::milliseconds(300)))
        types.push_back(f->type);
    EXPECT_EQ(types[0], MsgType::Welcome);
    EXPECT_EQ(std::count(types.begin(), types.end(), MsgType::Grant), 0);
    ASSERT_EQ(statuses.size(), 2u);
    const auto first = nlohmann::json::parse(statuses[0]);
    const auto second = nlohmann::json::parse(statuses[1]);
    const auto me = Daemon::client_by_pid(first, getpid());
    EXPECT_EQ(me["state"], "holding");
    EXPECT_EQ(me["memory"], 12345);
    EXPECT_EQ(Daemon::client_by_pid(second, getpid())["state"], "idle");
}

// ---- slow, silent and stuck clients ------------------------------------------------------

TEST_F(BadInput, SilentAndHalfSentClientsDoNotBlockOthers)
{
    LockClient silent = connect_to(daemon_);
    LockClient half = connect_to(daemon_);
    const Bytes hello = frame(MsgType::Hello, hello_payload({test_gpu(0, 1 << 30)}));
    ASSERT_TRUE(half.send_raw(hello.data(), 7));  // part of a header
    LockClient half_payload = connect_to(daemon_);
    ASSERT_TRUE(half_payload.send_raw(hello.data(), hello.size() - 1));
    ASSERT_TRUE(wait_drained(half.fd()));
    ASSERT_TRUE(wait_drained(half_payload.fd()));
    expect_others_unaffected();
}

TEST_F(BadInput, ClientThatNeverReadsIsDisconnected)
{
    // StatusQuery after StatusQuery, never reading a reply: the daemon's
    // buffer for it fills up and it is dropped; everybody else is served.
    LockClient stuck = connect_to(daemon_);
    const int fd = stuck.fd();
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    Bytes burst;
    for (int i = 0; i < 64; ++i)
        burst = burst + frame(MsgType::StatusQuery);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    bool disconnected = false;
    size_t bursts = 0;
    while (!disconnected && std::chrono::steady_clock::now() < deadline) {
        size_t sent = 0;
        while (sent < burst.size()) {
            const ssize_t n = ::send(fd, burst.data() + sent, burst.size() - sent, MSG_NOSIGNAL);
            if (n > 0) {
                sent += static_cast<size_t>(n);
                continue;
            }
            if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
                disconnected = true;
                break;
            }
            // The daemon has not read everything yet: wait for room.
            pollfd p{fd, POLLOUT, 0};
            poll(&p, 1, 100);
        }
        // Meanwhile the daemon answers others.
        if (++bursts % 16 == 0) {
            ASSERT_FALSE(daemon_.status().is_null()) << "daemon stopped answering";
        }
    }
    ASSERT_TRUE(disconnected) << "the stuck client was never disconnected";
    EXPECT_NE(daemon_.log().find("does not read its messages"), std::string::npos);
    expect_others_unaffected();
}

TEST_F(BadInput, WaitersThatStoppedReadingDoNotStallTheQueue)
{
    // Waiters that shut down their reading side: the daemon learns of it
    // only when a send to them fails (EPIPE); no EOF event is coming. Each
    // Grant to one of them fails, which frees the lock for the next, all
    // within the handling of one Released; the honest waiter behind them
    // must still get the lock.
    holder_->proceed();
    ASSERT_EQ(holder_->finish(), 0);
    LockClient holder = registered(daemon_);
    ASSERT_TRUE(holder.request(1));
    ASSERT_TRUE(holder.expect(MsgType::Grant, kTimeout));
    std::vector<LockClient> deaf;
    for (int i = 0; i < 12; ++i) {
        deaf.push_back(registered(daemon_));
        ASSERT_TRUE(deaf.back().request(1));
    }
    ASSERT_TRUE(
        daemon_
            .wait_status([](const nlohmann::json& s) { return s["gpus"][0]["queue"].size() == 12; })
            .is_object());
    for (auto& c : deaf)
        ASSERT_EQ(shutdown(c.fd(), SHUT_RD), 0);
    TestClient honest(daemon_.socket(), {});
    ASSERT_FALSE(daemon_.wait_client_state(honest.pid(), "waiting").is_null());
    // One frame, and the holder stays connected: no later event helps out.
    ASSERT_TRUE(holder.release(1));
    EXPECT_TRUE(honest.wait_for("grant")) << "the lock was handed to nobody";
    EXPECT_EQ(honest.finish(), 0);
}

TEST_F(BadInput, ClientThatFloodsDoesNotStarveOthers)
{
    // Many waiters make every event cost the daemon some work, so that a
    // flooding writer outpaces it and its socket never runs dry.
    std::vector<LockClient> waiters;
    for (int i = 0; i < 300; ++i) {
        waiters.push_back(registered(daemon_));
        ASSERT_TRUE(waiters.back().request(1));
    }
    ASSERT_TRUE(daemon_
                    .wait_status(
                        [](const nlohmann::json& s) { return s["gpus"][0]["queue"].size() == 300; })
                    .is_object());

    // A separate process writes valid Memory reports as fast as it can.
    LockClient flood = registered(daemon_);
    Bytes burst;
    for (int i = 0; i < 1024; ++i)
        burst = burst + frame(MsgType::Memory,
                              bytes_of(proto::MemoryPayload{0, 0, static_cast<uint64_t>(i), 0}));
    fflush(nullptr);
    const pid_t writer = fork();
    ASSERT_GE(writer, 0);
    if (writer == 0) {
        for (;;) {
            if (!flood.send_raw(burst.data(), burst.size()))
                _exit(0);
        }
    }
    // While it floods, others are still answered.
    for (int i = 0; i < 3; ++i)
        EXPECT_FALSE(daemon_.status().is_null()) << "no status while a client floods";
    holder_->proceed();
    EXPECT_EQ(holder_->finish(), 0);
    EXPECT_TRUE(waiters.front().expect(MsgType::Grant, kTimeout));
    kill(writer, SIGKILL);
    int st = 0;
    waitpid(writer, &st, 0);
}

}  // namespace
}  // namespace nvshare::test

namespace nvshare::test {
namespace {

// CPU time (user + system) the process has used, from /proc/PID/stat.
double cpu_seconds(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string f;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; fields >> f; ++i) {
        if (i == 14)
            utime = std::stoull(f);
        if (i == 15) {
            stime = std::stoull(f);
            break;
        }
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

size_t open_fds(pid_t pid)
{
    size_t n = 0;
    for ([[maybe_unused]] const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
        ++n;
    return n;
}

// Out of file descriptors, the daemon neither spins on the clients waiting
// in its backlog nor stops serving: the connections it has keep working, and
// a waiting client is taken in as soon as a descriptor is free.
TEST(Descriptors, ExhaustionNeitherSpinsNorStopsService)
{
    Daemon daemon;
    ASSERT_TRUE(daemon.start());
    const pid_t pid = daemon.process().pid();
    std::vector<LockClient> inside;
    for (int i = 0; i < 3; ++i)
        inside.push_back(connect_to(daemon));
    ASSERT_FALSE(daemon.status().is_null());
    // Room for exactly the descriptors it has now: the next accept fails.
    // Counted once it is steady (the status query's connection may still be
    // closing) and once only: two counts could differ, and a soft limit above
    // the hard one is EINVAL (the count can change while a connection closes).
    rlim_t open = 0;
    ASSERT_TRUE(wait_until([&] {
        open = open_fds(pid);
        std::this_thread::sleep_for(50ms);
        return open_fds(pid) == open;
    }));
    const rlimit limit{open, open};
    ASSERT_EQ(prlimit(pid, RLIMIT_NOFILE, &limit, nullptr), 0) << strerror(errno);

    std::vector<LockClient> waiting;
    for (int i = 0; i < 4; ++i)
        waiting.push_back(connect_to(daemon));  // connect() succeeds: the backlog
    for (LockClient& c : waiting)
        ASSERT_TRUE(c.send(MsgType::StatusQuery, nullptr, 0));
    const double before = cpu_seconds(pid);
    std::this_thread::sleep_for(1500ms);  // measuring idleness: nothing to wait for
    const double spent = cpu_seconds(pid) - before;
    EXPECT_LT(spent, 0.3) << "the daemon spun on its full backlog";
    EXPECT_NE(daemon.log().find("out of file descriptors"), std::string::npos) << daemon.log();

    // Those inside are still served.
    ASSERT_TRUE(inside[0].send(MsgType::StatusQuery, nullptr, 0));
    EXPECT_TRUE(inside[0].expect(MsgType::Status, kTimeout));
    // One leaves: a waiting client is taken in and answered.
    inside[1].close();
    EXPECT_TRUE(waiting[0].expect(MsgType::Status, kTimeout)) << daemon.log();
    const int status = daemon.stop();
    EXPECT_EQ(status, 0) << daemon.log();
}

}  // namespace
}  // namespace nvshare::test
