// scheduler_cost: what one lock hand-over costs the scheduling core alone,
// without sockets, as the number of clients grows.
//
// For each client count N it registers N clients on one GPU in mode on
// (quantum 1 h), queues them all, and lets the holder release and ask again
// `--cycles` times after a warm-up of max(2000, 2N): each cycle is a release,
// a grant and a request, with take_actions() after each event as the daemon
// calls it. It reports the time per cycle and the actions per cycle (the
// Grant and the Waiting notices). `--mixed`: three users and two classes
// (normal, batch) instead of one user of one class.
//
// `--auto`: auto mode's soft turns instead, where a waiter joins the holders
// when its user's share and the holders' starts allow: N clients of three
// users (normal class; `--mixed`: every other one batch) on one GPU whose
// memory they fit, all queued. Each cycle one job ends and another of its
// user takes its place: the earliest granted holder exits, a new client of
// its user connects and asks for the GPU, each client granted since reports
// its memory (its first growth), and 400 ms later, the starts settled
// (policy::kStartupSettle), the daemon's timer calls tick() and each client
// it granted reports too. Events come 100 ms apart. It reports the grants
// per cycle as well.
//
//   scheduler_cost [--clients 2,64,512,1024,4096,16384] [--cycles N] [--mixed] [--auto]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "daemon/scheduler.h"

namespace {

using namespace nvshare::daemon;
using namespace std::chrono_literals;

struct Result {
    double us_per_cycle = 0;
    double actions_per_cycle = 0;
    double grants_per_cycle = 0;
};

uint64_t grants_in(const std::vector<Action>& actions)
{
    return static_cast<uint64_t>(std::count_if(actions.begin(), actions.end(), [](const Action& a) {
        return a.kind == ActionKind::Grant;
    }));
}

Result run_auto(unsigned n, uint64_t cycles, bool mixed)
{
    Scheduler s(SchedulerSettings{Mode::Auto, 1h, 10s});
    // Room for every client's memory: soft turns throughout.
    constexpr uint64_t kMemory = uint64_t{512} << 20;
    s.ensure_gpu({"GPU-bench", "", uint64_t{n + 1} * kMemory});
    TimePoint now{std::chrono::seconds(1)};
    std::vector<ClientId> granted;  // since their last report
    uint64_t actions = 0, grants = 0;
    const auto take = [&] {
        const std::vector<Action> out = s.take_actions();
        actions += out.size();
        grants += grants_in(out);
        for (const Action& a : out)
            if (a.kind == ActionKind::Grant)
                granted.push_back(a.client);
    };
    ClientId next = 1;
    const auto start_job = [&](uint32_t user) {
        const ClientId id = next++;
        ClientInfo info{static_cast<int32_t>(id), 1000 + user, "bench"};
        if (mixed && id % 2 == 0)
            info.priority = Priority::Batch;
        now += 100ms;
        s.connect(id, info, {0}, now);
        take();
        s.request(id, gpu_bit(0), now);
        take();
    };
    const auto report = [&] {
        for (ClientId id : std::exchange(granted, {})) {
            if (s.client(id) == nullptr)
                continue;
            now += 100ms;
            s.report_memory(id, 0, MemoryUse{kMemory, 0, 0}, now);
            take();
        }
    };
    for (unsigned i = 0; i < n; ++i)
        start_job(i % 3);
    report();
    const auto cycle = [&] {
        if (s.gpus()[0].holders.empty()) {  // all wait for a deadline
            now += 100ms;
            s.tick(now);
            take();
            return report();
        }
        const ClientId ending = s.gpus()[0].holders.front();
        const uint32_t user = s.client(ending)->info.uid - 1000;
        now += 100ms;
        s.disconnect(ending, now);
        take();
        start_job(user);
        report();
        // The daemon's timer: the starts have settled, waiters may join.
        now += 400ms;
        s.tick(now);
        take();
        report();
    };
    for (uint64_t i = 0; i < std::max<uint64_t>(2000, 2 * uint64_t{n}); ++i)
        cycle();
    actions = grants = 0;
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < cycles; ++i)
        cycle();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    const auto per = [&](uint64_t x) {
        return static_cast<double>(x) / static_cast<double>(cycles);
    };
    return {us / static_cast<double>(cycles), per(actions), per(grants)};
}

Result run(unsigned n, uint64_t cycles, bool mixed)
{
    Scheduler s(SchedulerSettings{Mode::On, 1h, 10s});
    s.ensure_gpu({"GPU-bench", "", uint64_t{16} << 30});
    TimePoint now{std::chrono::seconds(1)};
    for (ClientId id = 1; id <= n; ++id) {
        ClientInfo info{static_cast<int32_t>(id),
                        mixed ? 1000 + static_cast<uint32_t>(id % 3) : 1000, "bench"};
        if (mixed)
            info.priority = id % 2 == 0 ? Priority::Batch : Priority::Normal;
        s.connect(id, info, {0}, now);
        s.take_actions();
    }
    for (ClientId id = 1; id <= n; ++id) {
        now += 1us;
        s.request(id, gpu_bit(0), now);
        s.take_actions();
    }
    uint64_t actions = 0, grants = 0;
    const auto take = [&] {
        const std::vector<Action> out = s.take_actions();
        actions += out.size();
        grants += grants_in(out);
    };
    const auto cycle = [&] {
        const ClientId holder = s.gpus()[0].holders.at(0);
        now += 10us;
        s.release(holder, gpu_bit(0), now);
        take();
        now += 10us;
        s.request(holder, gpu_bit(0), now);
        take();
    };
    for (uint64_t i = 0; i < std::max<uint64_t>(2000, 2 * uint64_t{n}); ++i)
        cycle();
    actions = grants = 0;
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < cycles; ++i)
        cycle();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    const auto per = [&](uint64_t x) {
        return static_cast<double>(x) / static_cast<double>(cycles);
    };
    return {us / static_cast<double>(cycles), per(actions), per(grants)};
}

}  // namespace

int main(int argc, char** argv)
{
    std::vector<unsigned> clients{2, 64, 512, 1024, 4096, 16384};
    uint64_t cycles = 20000;
    bool mixed = false, automatic = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--clients" && i + 1 < argc) {
            clients.clear();
            std::stringstream in(argv[++i]);
            for (std::string item; std::getline(in, item, ',');)
                clients.push_back(static_cast<unsigned>(std::stoul(item)));
        } else if (arg == "--cycles" && i + 1 < argc) {
            cycles = std::stoull(argv[++i]);
        } else if (arg == "--mixed") {
            mixed = true;
        } else if (arg == "--auto") {
            automatic = true;
        } else {
            fprintf(stderr,
                    "usage: scheduler_cost [--clients 2,64,512] [--cycles N] [--mixed] [--auto]\n");
            return 2;
        }
    }
    printf("%8s %14s %16s %15s\n", "clients", "us/cycle", "actions/cycle", "grants/cycle");
    for (unsigned n : clients) {
        const Result r = automatic ? run_auto(n, cycles, mixed) : run(n, cycles, mixed);
        printf("%8u %14.2f %16.1f %15.2f\n", n, r.us_per_cycle, r.actions_per_cycle,
               r.grants_per_cycle);
        fflush(stdout);
    }
    return 0;
}
