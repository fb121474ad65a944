// Which holders keep their queued work short (their run-ahead bounded), so
// that they can let go quickly: a holder of a GPU taken one holder or group
// at a time where a process of a higher class is around (busy, or idle for
// less than policy::kHigherClassIdleRelease: MemberClasses::higher_around).
// It keeps the GPUs with a bounded holder and when an idle process stops
// counting, so that only those and the serialized GPUs are looked at again.
// Part of the scheduling core, pure.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "daemon/action.h"
#include "daemon/client.h"
#include "daemon/gpu.h"
#include "daemon/member_classes.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

class RunAhead {
public:
    // A GPU's clients by class (the scheduler's).
    using ClassesOf = std::function<const MemberClasses&(GpuIndex)>;
    explicit RunAhead(ClassesOf classes) : classes_(std::move(classes)) {}

    // `c` was just granted, `serialized` being the GPUs taken one holder or
    // group at a time: whether its grant tells it to keep its work short
    // (ClientRecord::bounded_sent).
    void granted(ClientRecord& c, GpuSet serialized, TimePoint now);
    // Tells each holder of the serialized GPUs, and of those that had a
    // bounded holder, whether it is bounded, where that changed (a RunAhead
    // action each, in `out`).
    void publish(const std::vector<Gpu>& gpus, std::map<ClientId, ClientRecord>& clients,
                 GpuSet serialized, TimePoint now, std::vector<Action>& out);
    // When an idle process of a higher class stops counting.
    std::optional<TimePoint> recheck() const { return recheck_; }

private:
    bool bounded(const ClientRecord& c, GpuSet serialized, TimePoint now);

    ClassesOf classes_;
    GpuSet bounded_gpus_ = 0;  // GPUs with a holder told to keep its work short
    std::optional<TimePoint> recheck_;
};

}  // namespace nvshare::daemon
