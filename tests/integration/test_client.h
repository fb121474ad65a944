// nvshare-testclient processes for the integration tests, their stdout
// parsed into events.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/wait.h"

namespace nvshare::test {

// One event line of nvshare-testclient: "<ns> <name> <details>".
struct Event {
    uint64_t ns = 0;
    std::string name;
    std::string details;
};

class TestClient {
public:
    TestClient(const std::string& socket, std::vector<std::string> args,
               std::optional<uid_t> uid = std::nullopt);
    ~TestClient();

    pid_t pid() const { return process_.pid(); }
    // Reads events until one named `name` arrives (it is returned), or timeout.
    std::optional<Event> wait_for(const std::string& name, Millis timeout = kTimeout);
    // Tells a --hold-until-stdin / --cycles 0 client to go on.
    void proceed();
    // EOF on its stdin: every later hold ends at once.
    void close_stdin() { process_.close_stdin(); }
    void kill(int sig) { process_.signal(sig); }
    // Reads all events until EOF, then the exit status (see Process::wait()).
    int finish(Millis timeout = kTimeout);
    const std::vector<Event>& events() const { return events_; }
    std::vector<Event> events_named(const std::string& name) const;
    std::string transcript() const;  // for failure messages
    bool at_eof() const { return eof_; }
    // Reads what any of `clients` printed, waiting up to `timeout` for the
    // first output: keeps many chatty clients from blocking on a full pipe.
    static void read_any(const std::vector<TestClient*>& clients, Millis timeout);

private:
    bool read_some(Millis timeout);  // false on EOF or timeout
    Process process_;
    std::string partial_;
    std::vector<Event> events_;
    size_t next_ = 0;  // events before this were returned by wait_for
    bool eof_ = false;
};

}  // namespace nvshare::test
