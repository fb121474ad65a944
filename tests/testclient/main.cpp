// nvshare-testclient: a scripted client of nvshared for the integration
// tests. It speaks the protocol through LockClient and prints one line per
// event with a CLOCK_MONOTONIC timestamp, so that tests can check the order
// of events and that holds of different processes never overlap.
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "common/lock_client.h"
#include "common/mode.h"
#include "tests/testclient/options.h"

namespace {

using namespace std::chrono_literals;
using nvshare::Frame;
using nvshare::LockClient;
using nvshare::proto::MsgType;
using nvshare::testclient::Options;
using SteadyClock = std::chrono::steady_clock;

enum ExitCode { kDone = 0, kFailed = 1, kNoDaemon = 3, kWasRevoked = 4 };

unsigned long long monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<unsigned long long>(ts.tv_sec) * 1000000000ull +
           static_cast<unsigned long long>(ts.tv_nsec);
}

void event(const char* name, const std::string& details = {})
{
    printf("%llu %s%s%s\n", monotonic_ns(), name, details.empty() ? "" : " ", details.c_str());
    fflush(stdout);
}

std::string hex(uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

// The state letter of /proc/self/stat: that of the main thread, 'Z' once
// it has ended while other threads run.
char main_thread_state()
{
    char buf[512];
    FILE* f = fopen("/proc/self/stat", "re");
    if (f == nullptr)
        return '?';
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char* end = strrchr(buf, ')');  // the name may hold anything
    return end != nullptr && end[1] == ' ' ? end[2] : '?';
}

// Ends the process as one whose driver still frees its GPU memory after its
// connection closed: the main thread ends (the kernel marks the process as
// exiting), then the connection closes, and the process ends `linger` later.
// `fd` is a copy of the connection's: unwinding the main thread closes the
// client's own. The closer watches the main thread's state rather than
// joining it, which ThreadSanitizer cannot follow.
[[noreturn]] void exit_slowly(int fd, std::chrono::milliseconds linger)
{
    struct Exit {
        int fd;
        std::chrono::milliseconds linger;
    };
    static Exit e{fd, linger};
    pthread_t closer;
    if (pthread_create(
            &closer, nullptr,
            [](void*) -> void* {
                // Its exit has begun; bounded, as everything here.
                for (int i = 0; i < 5000 && main_thread_state() != 'Z'; ++i)
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                event("closing");
                close(e.fd);
                std::this_thread::sleep_for(e.linger);
                _exit(0);
            },
            nullptr) != 0)
        _exit(1);
    pthread_exit(nullptr);
}

// What ended a wait.
enum class Wake { Frame, Stdin, Timeout, Eof };

class Session {
public:
    explicit Session(Options options) : o_(std::move(options)) {}
    int run();

private:
    Wake wait(SteadyClock::time_point deadline, bool watch_stdin, Frame* frame);
    bool read_stdin();  // true once a line or EOF arrived
    void report(const Frame& f);
    // Waits for a frame of `type`, reporting every frame on the way.
    bool await(MsgType type, Frame* frame);
    int fail(Wake why);
    int hold_and_release(uint64_t held);

    Options o_;
    LockClient client_;
    bool stdin_eof_ = false;
    size_t stdin_lines_ = 0;
    bool revoked_once_ = false;
};

Wake Session::wait(SteadyClock::time_point deadline, bool watch_stdin, Frame* frame)
{
    for (;;) {
        if (auto f = client_.receive(0ms)) {
            *frame = std::move(*f);
            return Wake::Frame;
        }
        if (client_.eof())
            return Wake::Eof;
        if (watch_stdin && (stdin_eof_ || stdin_lines_ > 0)) {
            if (stdin_lines_ > 0)
                --stdin_lines_;
            return Wake::Stdin;
        }
        const auto left =
            std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
        if (left.count() <= 0)
            return Wake::Timeout;
        pollfd fds[2] = {{client_.fd(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
        const int timeout = static_cast<int>(std::min<int64_t>(left.count(), INT_MAX));
        const int r = poll(fds, watch_stdin ? 2 : 1, timeout);
        if (r > 0 && watch_stdin && fds[1].revents != 0)
            read_stdin();
    }
}

bool Session::read_stdin()
{
    char buf[256];
    const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n <= 0) {
        stdin_eof_ = true;
        return true;
    }
    stdin_lines_ += static_cast<size_t>(std::count(buf, buf + n, '\n'));
    return stdin_lines_ > 0;
}

void Session::report(const Frame& f)
{
    using namespace nvshare::proto;
    switch (f.type) {
        case MsgType::Welcome: {
            const auto w = f.as<WelcomeFixed>();
            event("welcome", "id=" + std::to_string(w.client_id) +
                                 " mode=" + mode_name(static_cast<Mode>(w.settings.mode)) +
                                 " tq_us=" + std::to_string(w.settings.time_quantum_us));
            break;
        }
        case MsgType::Settings: {
            const auto s = f.as<SettingsFixed>();
            event("settings", std::string("mode=") + mode_name(static_cast<Mode>(s.mode)) +
                                  " tq_us=" + std::to_string(s.time_quantum_us));
            break;
        }
        case MsgType::Grant: {
            const auto g = f.as<GrantPayload>();
            event("grant", "mask=" + hex(g.gpus) + " flags=" + std::to_string(g.flags));
            break;
        }
        case MsgType::Drop: {
            const auto d = f.as<DropPayload>();
            event("drop", "mask=" + hex(d.gpus) + " grace_us=" + std::to_string(d.grace_us));
            break;
        }
        case MsgType::Revoked:
            event("revoked", "mask=" + hex(f.as<GpuMaskPayload>().gpus));
            break;
        case MsgType::Contended:
            event("contended", "mask=" + hex(f.as<GpuMaskPayload>().gpus));
            break;
        case MsgType::Error:
            event("error", "code=" + std::to_string(f.as<ErrorFixed>().code) +
                               " text=" + f.text(sizeof(ErrorFixed)));
            break;
        default:
            event("frame", "type=" + std::to_string(static_cast<unsigned>(f.type)));
            break;
    }
}

bool Session::await(MsgType type, Frame* frame)
{
    const auto deadline = SteadyClock::now() + o_.timeout;
    for (;;) {
        const Wake w = wait(deadline, false, frame);
        if (w != Wake::Frame) {
            fail(w);
            return false;
        }
        report(*frame);
        if (frame->type == type)
            return true;
        if (frame->type == MsgType::Error)
            return false;
    }
}

int Session::fail(Wake why)
{
    if (why == Wake::Eof)
        event("eof");
    else if (why == Wake::Timeout)
        event("timeout");
    return kFailed;
}

int Session::hold_and_release(uint64_t held)
{
    const auto deadline =
        o_.hold_until_stdin ? SteadyClock::time_point::max() : SteadyClock::now() + o_.hold;
    for (;;) {
        Frame f;
        const Wake w = wait(deadline, o_.hold_until_stdin, &f);
        if (w == Wake::Eof)
            return fail(w);
        if (w != Wake::Frame)
            break;  // the hold is over
        report(f);
        if (f.type == MsgType::Error)
            return kFailed;
        if (f.type == MsgType::Revoked) {
            revoked_once_ = true;
            return kDone;  // nothing left to release
        }
        if (f.type == MsgType::Drop && !o_.ignore_drop)
            break;
    }
    if (o_.exit_slowly)
        exit_slowly(dup(client_.fd()), *o_.exit_slowly);
    event("released", "mask=" + hex(held));
    if (!client_.release(held)) {
        event("eof");
        return kFailed;
    }
    return kDone;
}

int Session::run()
{
    std::string error;
    if (!client_.connect(o_.socket_path, &error)) {
        event("error", "text=" + error);
        return kNoDaemon;
    }
    Frame f;
    if (!client_.hello(o_.comm, o_.gpus) || !await(MsgType::Welcome, &f))
        return kFailed;
    for (const auto& [gpu, bytes] : o_.memory) {
        event("memory", "gpu=" + std::to_string(gpu) + " bytes=" + std::to_string(bytes));
        client_.report_memory(gpu, bytes);
    }
    if (o_.cycles == 0) {
        // Registered and idle until told to go.
        for (;;) {
            const Wake w = wait(SteadyClock::time_point::max(), true, &f);
            if (w == Wake::Stdin)
                break;
            if (w == Wake::Eof)
                return fail(w);
            report(f);
            if (f.type == MsgType::Error)
                return kFailed;
        }
    }
    const uint64_t all = o_.gpus.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << o_.gpus.size()) - 1;
    const uint64_t mask = o_.mask.value_or(all);
    for (unsigned k = 0; k < o_.cycles; ++k) {
        event("request", "mask=" + hex(mask));
        if (!client_.request(mask))
            return fail(Wake::Eof);
        if (!await(MsgType::Grant, &f))
            return kFailed;
        if (const int r = hold_and_release(f.as<nvshare::proto::GrantPayload>().gpus); r != kDone)
            return r;
    }
    event("done");
    return revoked_once_ ? kWasRevoked : kDone;
}

}  // namespace

int main(int argc, char** argv)
{
    auto parsed = nvshare::testclient::parse_options(argc, argv);
    if (!parsed.run)
        return parsed.exit_code;
    Session session(std::move(parsed.options));
    return session.run();
}
