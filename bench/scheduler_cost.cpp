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
//   scheduler_cost [--clients 2,64,512,1024,4096,16384] [--cycles N] [--mixed]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/scheduler.h"

namespace {

using namespace nvshare::daemon;
using namespace std::chrono_literals;

struct Result {
    double us_per_cycle = 0;
    double actions_per_cycle = 0;
};

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
    uint64_t actions = 0;
    const auto cycle = [&] {
        const ClientId holder = s.gpus()[0].holders.at(0);
        now += 10us;
        s.release(holder, gpu_bit(0), now);
        actions += s.take_actions().size();
        now += 10us;
        s.request(holder, gpu_bit(0), now);
        actions += s.take_actions().size();
    };
    for (uint64_t i = 0; i < std::max<uint64_t>(2000, 2 * uint64_t{n}); ++i)
        cycle();
    actions = 0;
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < cycles; ++i)
        cycle();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    return {us / static_cast<double>(cycles),
            static_cast<double>(actions) / static_cast<double>(cycles)};
}

}  // namespace

int main(int argc, char** argv)
{
    std::vector<unsigned> clients{2, 64, 512, 1024, 4096, 16384};
    uint64_t cycles = 20000;
    bool mixed = false;
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
        } else {
            fprintf(stderr, "usage: scheduler_cost [--clients 2,64,512] [--cycles N] [--mixed]\n");
            return 2;
        }
    }
    printf("%8s %14s %16s\n", "clients", "us/cycle", "actions/cycle");
    for (unsigned n : clients) {
        const Result r = run(n, cycles, mixed);
        printf("%8u %14.2f %16.1f\n", n, r.us_per_cycle, r.actions_per_cycle);
        fflush(stdout);
    }
    return 0;
}
