// Process start cost of libnvshare.so: a program (/bin/true) started with no
// preload, with an empty preloaded library (the floor: what loading any
// library costs on this machine), and with libnvshare.so, rotating in one run
// so all see the same machine state. Reports medians and the differences
// (issue 44's target: libnvshare.so at most +5 us over the empty library).
//
// Each LIBRARY is timed as a copy written in one pass into a directory of its
// own: how a file was written decides how the page cache holds it, and a
// library just written by the linker starts several microseconds slower than
// the same bytes copied (bench/README.md), so libraries written differently
// would not be compared on their own cost.
//
// Usage: preload-start-bench ITERATIONS PROGRAM LIBRARY...
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

double now_us()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// One start-to-exit of the program, in microseconds (-1 on failure).
double run_once(const char* program, char** env)
{
    char* argv[] = {const_cast<char*>(program), nullptr};
    const double t0 = now_us();
    pid_t pid = 0;
    if (posix_spawn(&pid, program, nullptr, nullptr, argv, env) != 0)
        return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    const double t1 = now_us();
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? t1 - t0 : -1;
}

// Copies FROM to TO in one sequential pass; false (and a message) on error.
bool copy_file(const std::string& from, const std::string& to)
{
    const int in = open(from.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        fprintf(stderr, "cannot open %s: %s\n", from.c_str(), strerror(errno));
        return false;
    }
    const int out = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (out < 0) {
        fprintf(stderr, "cannot create %s: %s\n", to.c_str(), strerror(errno));
        close(in);
        return false;
    }
    std::vector<char> buffer(1 << 20);
    bool ok = true;
    for (;;) {
        const ssize_t n = read(in, buffer.data(), buffer.size());
        if (n == 0)
            break;
        if (n < 0 || write(out, buffer.data(), static_cast<size_t>(n)) != n) {
            fprintf(stderr, "cannot copy %s to %s: %s\n", from.c_str(), to.c_str(),
                    strerror(errno));
            ok = false;
            break;
        }
    }
    close(in);
    return close(out) == 0 && ok;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s ITERATIONS PROGRAM LIBRARY...\n", argv[0]);
        return 2;
    }
    const int iterations = atoi(argv[1]);
    const char* program = argv[2];

    // Variant 0: no preload; variant i: LD_PRELOAD= a copy of argv[2 + i] in
    // a directory of its own. Otherwise the same environment.
    const char* tmp = getenv("TMPDIR");
    std::string dir_template =
        std::string(tmp != nullptr && *tmp != 0 ? tmp : "/tmp") + "/nvshare-start-XXXXXX";
    if (mkdtemp(dir_template.data()) == nullptr) {
        fprintf(stderr, "cannot make a directory %s: %s\n", dir_template.c_str(), strerror(errno));
        return 1;
    }
    const std::string dir = dir_template;
    std::vector<std::string> names = {"no preload"};
    std::vector<std::string> copies;
    std::vector<std::string> preloads;
    bool copied = true;
    for (int i = 3; i < argc && copied; ++i) {
        const std::string sub = dir + "/" + std::to_string(i - 2);
        const char* base = strrchr(argv[i], '/');
        const std::string copy = sub + "/" + (base != nullptr ? base + 1 : argv[i]);
        copied = mkdir(sub.c_str(), 0755) == 0 && copy_file(argv[i], copy);
        names.push_back(argv[i]);
        copies.push_back(copy);
        preloads.push_back("LD_PRELOAD=" + copy);
    }
    const auto remove_copies = [&] {
        for (const std::string& copy : copies) {
            unlink(copy.c_str());
            rmdir(copy.substr(0, copy.rfind('/')).c_str());
        }
        rmdir(dir.c_str());
    };
    if (!copied) {
        remove_copies();
        return 1;
    }
    std::vector<std::vector<char*>> envs(names.size());
    for (char** e = environ; *e != nullptr; ++e)
        if (std::string(*e).rfind("LD_PRELOAD=", 0) != 0)
            for (auto& env : envs)
                env.push_back(*e);
    for (size_t i = 0; i < preloads.size(); ++i)
        envs[i + 1].push_back(const_cast<char*>(preloads[i].c_str()));
    for (auto& env : envs)
        env.push_back(nullptr);

    std::vector<std::vector<double>> times(names.size());
    for (int i = -50; i < iterations; ++i) {  // the first 50 rounds warm the caches
        for (size_t v = 0; v < names.size(); ++v) {
            const double t = run_once(program, envs[v].data());
            if (t < 0) {
                fprintf(stderr, "%s failed to run (%s)\n", program, names[v].c_str());
                remove_copies();
                return 1;
            }
            if (i >= 0)
                times[v].push_back(t);
        }
    }
    remove_copies();
    printf("%s: %d starts per variant, rotating\n", program, iterations);
    const double base = median(times[0]);
    for (size_t v = 0; v < names.size(); ++v) {
        const double m = median(times[v]);
        printf("  %-60s median %8.1f us  %+7.1f us  ratio %.3f\n", names[v].c_str(), m, m - base,
               m / base);
    }
    return 0;
}
