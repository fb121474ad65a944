// Process start cost of libnvshare.so: a program (/bin/true) started with no
// preload, with an empty preloaded library (the floor: what loading any
// library costs on this machine), and with libnvshare.so, rotating in one run
// so all see the same machine state. Reports medians and the differences
// (target: libnvshare.so at most +30 us over no preload).
//
// Usage: preload-start-bench ITERATIONS PROGRAM LIBRARY...
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
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

    // Variant 0: no preload; variant i: LD_PRELOAD=argv[2 + i]. Otherwise the
    // same environment.
    std::vector<std::string> names = {"no preload"};
    std::vector<std::string> preloads;
    for (int i = 3; i < argc; ++i) {
        names.push_back(argv[i]);
        preloads.push_back(std::string("LD_PRELOAD=") + argv[i]);
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
                return 1;
            }
            if (i >= 0)
                times[v].push_back(t);
        }
    }
    printf("%s: %d starts per variant, rotating\n", program, iterations);
    const double base = median(times[0]);
    for (size_t v = 0; v < names.size(); ++v) {
        const double m = median(times[v]);
        printf("  %-60s median %8.1f us  %+7.1f us  ratio %.3f\n", names[v].c_str(), m, m - base,
               m / base);
    }
    return 0;
}
