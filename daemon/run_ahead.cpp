#include "daemon/run_ahead.h"

#include "daemon/turn_policy.h"

namespace nvshare::daemon {

bool RunAhead::bounded(const ClientRecord& c, GpuSet serialized, TimePoint now)
{
    const int own = policy::class_rank(c.info.priority);
    bool higher = false;
    for_each_gpu(c.held & serialized, [&](GpuIndex g) {
        // Looked at again when an idle one has been idle for long enough.
        higher |= classes_(g).higher_around(own, now, policy::kHigherClassIdleRelease, recheck_);
    });
    return higher;
}

void RunAhead::granted(ClientRecord& c, GpuSet serialized, TimePoint now)
{
    c.bounded_sent = bounded(c, serialized, now);
    if (c.bounded_sent)
        bounded_gpus_ |= c.held;
}

// Only GPUs taken in turns have a bounded holder (one each, but for holders
// being asked to let go), and those that had one may need to hear it is over.
void RunAhead::publish(const std::vector<Gpu>& gpus, std::map<ClientId, ClientRecord>& clients,
                       GpuSet serialized, TimePoint now, std::vector<Action>& out)
{
    if (recheck_ && *recheck_ <= now)
        recheck_.reset();  // made again below where still due
    const GpuSet look = serialized | bounded_gpus_;
    bounded_gpus_ = 0;
    for_each_gpu(look, [&](GpuIndex g) {
        for (ClientId h : gpus[g].holders) {
            ClientRecord& c = clients.at(h);
            const bool want = bounded(c, serialized, now);
            if (want != c.bounded_sent) {
                c.bounded_sent = want;
                Action a{ActionKind::RunAhead, c.id, c.held};
                a.bounded = want;
                out.push_back(a);
            }
            if (c.bounded_sent)
                bounded_gpus_ |= c.held;
        }
    });
}

}  // namespace nvshare::daemon
