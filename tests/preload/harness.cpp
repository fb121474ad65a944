#include "harness.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/lock_client.h"

namespace nvshare::test {

const Paths& Paths::get()
{
    static const Paths paths = [] {
        auto need = [](const char* name) {
            const char* v = getenv(name);
            if (v == nullptr)
                throw std::runtime_error(std::string(name) +
                                         " is not set (run through meson test)");
            return std::string(v);
        };
        Paths p{need("NVSHARE_TEST_NVSHARED"),     need("NVSHARE_TEST_LIBRARY"),
                need("NVSHARE_TEST_FAKECUDA_DIR"), need("NVSHARE_TEST_CLIENT"),
                need("NVSHARE_TEST_CLIENT_DL"),    ""};
        const char* runtime = getenv("NVSHARE_TEST_PRELOAD_RUNTIME");
        p.preload = (runtime != nullptr && *runtime != '\0')
                        ? std::string(runtime) + " " + p.library
                        : p.library;
        return p;
    }();
    return paths;
}

TempDir::TempDir()
{
    char pattern[] = "/tmp/nvshare-e2e-XXXXXX";
    if (mkdtemp(pattern) == nullptr)
        throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

TempDir::~TempDir()
{
    nftw(
        path_.c_str(), [](const char* p, const struct stat*, int, FTW*) { return remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
}

Process::Process(Process&& other) noexcept
    : pid_(other.pid_),
      status_(other.status_),
      out_(std::move(other.out_)),
      err_(std::move(other.err_))
{
    other.pid_ = -1;
}

Process& Process::operator=(Process&& other) noexcept
{
    if (this != &other) {
        if (pid_ > 0 && status_ == -2)
            wait(std::chrono::milliseconds(0));
        pid_ = other.pid_;
        status_ = other.status_;
        out_ = std::move(other.out_);
        err_ = std::move(other.err_);
        other.pid_ = -1;
    }
    return *this;
}

Process::~Process()
{
    if (pid_ > 0 && status_ == -2)
        wait(std::chrono::milliseconds(0));  // kills it: a test never leaves processes behind
}

int Process::wait(std::chrono::milliseconds timeout)
{
    if (pid_ <= 0)
        return -1;
    if (status_ != -2)
        return status_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int st = 0;
        const pid_t r = waitpid(pid_, &st, WNOHANG);
        if (r == pid_) {
            status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return status_;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            kill(pid_, SIGKILL);
            waitpid(pid_, &st, 0);
            status_ = -1;
            return status_;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

bool Process::running()
{
    if (pid_ <= 0 || status_ != -2)
        return false;
    int st = 0;
    const pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return false;
    }
    return true;
}

void Process::signal(int sig)
{
    if (pid_ > 0 && status_ == -2)
        kill(pid_, sig);
}

std::string Process::out() const
{
    return read_file(out_);
}
std::string Process::err() const
{
    return read_file(err_);
}

Process spawn(const std::string& program, const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env, const std::string& out,
              const std::string& err)
{
    const pid_t pid = fork();
    if (pid < 0)
        throw std::runtime_error("fork failed");
    if (pid == 0) {
        for (const auto& [name, value] : env) {
            if (value == "\x01")
                unsetenv(name.c_str());
            else
                setenv(name.c_str(), value.c_str(), 1);
        }
        const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        std::vector<char*> argv;
        argv.push_back(const_cast<char*>(program.c_str()));
        for (const auto& a : args)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(program.c_str(), argv.data());
        _exit(127);
    }
    return Process(pid, out, err);
}

Daemon::Daemon(const TempDir& dir, std::vector<std::string> args)
    : dir_(dir), args_(std::move(args)), socket_(dir.file("nvshared.sock"))
{
    start();
}

Daemon::~Daemon()
{
    stop();
}

void Daemon::start()
{
    std::vector<std::string> args = {"--socket", socket_};
    args.insert(args.end(), args_.begin(), args_.end());
    const std::string log = dir_.file("nvshared." + std::to_string(starts_++) + ".log");
    process_ = spawn(Paths::get().nvshared, args, {}, log, log);
    // Ready when it answers a status query on the socket.
    if (!eventually([&] { return !status().is_null() || !process_.running(); },
                    std::chrono::seconds(10)) ||
        status().is_null())
        throw std::runtime_error("nvshared did not start: " + read_file(log));
}

void Daemon::stop(int sig)
{
    if (process_.running()) {
        process_.signal(sig);
        process_.wait(std::chrono::seconds(10));
    }
}

nlohmann::json Daemon::status() const
{
    std::string error;
    const std::string text = LockClient::query_status(socket_, &error);
    if (text.empty())
        return nullptr;
    return nlohmann::json::parse(text, nullptr, false);
}

std::string Daemon::log() const
{
    std::string all;
    for (int i = 0; i < starts_; ++i)
        all += read_file(dir_.file("nvshared." + std::to_string(i) + ".log"));
    return all;
}

Process start_client(const TempDir& dir, const std::string& socket, const ClientRun& run,
                     const std::string& name, const std::string& etc_ld_so_preload)
{
    const Paths& p = Paths::get();
    std::map<std::string, std::string> env = {
        {"LD_PRELOAD", p.preload},
        {"LD_LIBRARY_PATH", p.fake_dir},
        {"FAKECUDA_LOG", dir.file("fake.log")},
        {"NVSHARE_SOCKET", socket},
        {"NVSHARE_DEBUG", "\x01"},
        {"NVSHARE_DISABLE", "\x01"},
    };
    for (const auto& [k, v] : run.env)
        env[k] = v;
    const std::string& client = run.dl_client ? p.client_dl : p.client;
    if (etc_ld_so_preload.empty())
        return spawn(client, run.args, env, dir.file(name + ".out"), dir.file(name + ".err"));
    // unshare and sh exec in place, so the pid is the client's. The list is
    // written last: only the client starts with it.
    const std::string script =
        "set -e; saved=$(mktemp -d); cp -a /etc/. \"$saved\"; "
        "mount -t tmpfs -o mode=0755 nvshare-test-etc /etc; cp -a \"$saved\"/. /etc; "
        "rm -rf \"$saved\"; printf '%s\\n' \"$NVSHARE_TEST_ETC_PRELOAD\" >/etc/ld.so.preload; "
        "[ -z \"$NVSHARE_TEST_CLIENT_PRELOAD\" ] || export "
        "LD_PRELOAD=\"$NVSHARE_TEST_CLIENT_PRELOAD\"; "
        "exec \"$@\"";
    std::vector<std::string> args = {"--mount", "--propagation", "private", "/bin/sh",
                                     "-c",      script,          "sh",      client};
    args.insert(args.end(), run.args.begin(), run.args.end());
    env["NVSHARE_TEST_ETC_PRELOAD"] = etc_ld_so_preload;
    // Only the client gets the preload (a sanitizer's runtime in it aborts
    // the set-up's cp and mount).
    env["NVSHARE_TEST_CLIENT_PRELOAD"] = env["LD_PRELOAD"] == "\x01" ? "" : env["LD_PRELOAD"];
    env["LD_PRELOAD"] = "\x01";
    return spawn("/usr/bin/unshare", args, env, dir.file(name + ".out"), dir.file(name + ".err"));
}

std::vector<Work> read_work(const std::string& log)
{
    std::istringstream in(read_file(log));
    std::map<std::pair<pid_t, uint64_t>, Work> open;
    std::vector<Work> done;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        uint64_t ns = 0, id = 0;
        pid_t pid = 0;
        std::string event, name;
        if (!(f >> ns >> pid >> event))
            continue;
        if (event == "start" && (f >> id >> name)) {
            open[{pid, id}] = Work{pid, ns, 0, name};
        } else if (event == "end" && (f >> id)) {
            auto it = open.find({pid, id});
            if (it != open.end()) {
                it->second.end = ns;
                done.push_back(it->second);
                open.erase(it);
            }
        }
    }
    for (auto& [key, w] : open) {  // still running when the log was read
        w.end = UINT64_MAX;
        done.push_back(w);
    }
    return done;
}

std::vector<Work> work_of(const std::vector<Work>& all, pid_t pid)
{
    std::vector<Work> out;
    for (const Work& w : all)
        if (w.pid == pid)
            out.push_back(w);
    return out;
}

bool overlapped(const std::vector<Work>& all, pid_t a, pid_t b)
{
    for (const Work& x : all)
        for (const Work& y : all)
            if (x.pid == a && y.pid == b && x.start < y.end && y.start < x.end)
                return true;
    return false;
}

int count_events(const std::string& log, pid_t pid, const std::string& needle)
{
    std::istringstream in(read_file(log));
    std::string line;
    int n = 0;
    const std::string prefix = " " + std::to_string(pid) + " ";
    while (std::getline(in, line))
        if (line.find(prefix) != std::string::npos && line.find(needle) != std::string::npos)
            ++n;
    return n;
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= deadline)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

bool file_exists(const std::string& path)
{
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

void touch(const std::string& path)
{
    std::ofstream(path).put('\n');
}

std::string read_file(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

nlohmann::json client_status(const nlohmann::json& status, pid_t pid)
{
    if (status.is_null() || !status.contains("clients"))
        return nullptr;
    for (const auto& c : status["clients"])
        if (c.value("pid", 0) == pid)
            return c;
    return nullptr;
}

uint64_t sum_over_clients(const nlohmann::json& status, const char* field)
{
    uint64_t sum = 0;
    if (!status.is_null() && status.contains("clients"))
        for (const auto& c : status["clients"])
            sum += c.value(field, uint64_t{0});
    return sum;
}

}  // namespace nvshare::test
