#include "tests/integration/test_client.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "tests/support/programs.h"

namespace nvshare::test {

namespace {

// Milliseconds left until deadline, at least 0, for poll().
Millis left(std::chrono::steady_clock::time_point deadline)
{
    return std::max(Millis(0),
                    std::chrono::ceil<Millis>(deadline - std::chrono::steady_clock::now()));
}

}  // namespace

TestClient::TestClient(const std::string& socket, std::vector<std::string> args,
                       std::optional<uid_t> uid)
{
    Process::Spec spec;
    spec.uid = uid;
    spec.argv = {testclient_path(), "--socket", socket};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.pipe_stdin = true;
    spec.pipe_stdout = true;
    process_ = Process(std::move(spec));
}

TestClient::~TestClient()
{
    if (::testing::Test::HasFailure())
        std::cerr << "---- testclient " << pid() << " ----\n" << transcript();
}

bool TestClient::read_some(Millis timeout)
{
    if (eof_)
        return false;
    pollfd p{process_.stdout_fd(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0)
        return false;
    char buf[4096];
    const ssize_t n = read(process_.stdout_fd(), buf, sizeof buf);
    if (n <= 0) {
        eof_ = true;
        return false;
    }
    partial_.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = partial_.find('\n')) != std::string::npos) {
        const std::string line = partial_.substr(0, nl);
        partial_.erase(0, nl + 1);
        Event e;
        std::istringstream in(line);
        in >> e.ns >> e.name;
        std::getline(in >> std::ws, e.details);
        events_.push_back(std::move(e));
    }
    return true;
}

std::optional<Event> TestClient::wait_for(const std::string& name, Millis timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        for (; next_ < events_.size(); ++next_)
            if (events_[next_].name == name)
                return events_[next_++];
        if (!read_some(left(deadline)))
            if (eof_ || std::chrono::steady_clock::now() >= deadline)
                return std::nullopt;
    }
}

void TestClient::proceed()
{
    // A client that ended meanwhile (a drop ended its hold, on a slow
    // machine before the test came here) has closed its stdin: the write
    // then fails with EPIPE instead of killing the test with SIGPIPE, and
    // finish() reports how the client ended.
    static const bool pipe_ignored = signal(SIGPIPE, SIG_IGN) != SIG_ERR;
    (void)pipe_ignored;
    if (process_.stdin_fd() >= 0) {
        const ssize_t n = write(process_.stdin_fd(), "\n", 1);
        (void)n;
    }
}

int TestClient::finish(Millis timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!eof_ && left(deadline) > 0ms)
        read_some(left(deadline));
    return process_.wait(left(deadline));
}

void TestClient::read_any(const std::vector<TestClient*>& clients, Millis timeout)
{
    std::vector<pollfd> fds;
    std::vector<TestClient*> open;
    for (TestClient* c : clients)
        if (!c->eof_) {
            fds.push_back({c->process_.stdout_fd(), POLLIN, 0});
            open.push_back(c);
        }
    if (poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) <= 0)
        return;
    for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents != 0)
            open[i]->read_some(0ms);
}

std::vector<Event> TestClient::events_named(const std::string& name) const
{
    std::vector<Event> out;
    for (const auto& e : events_)
        if (e.name == name)
            out.push_back(e);
    return out;
}

std::string TestClient::transcript() const
{
    std::string s;
    for (const auto& e : events_)
        s += std::to_string(e.ns) + " " + e.name + " " + e.details + "\n";
    return s;
}

}  // namespace nvshare::test
