// The clients registered on one GPU by class: how many of each class are
// busy (waiting or holding) and when each idle one last used the GPU, so
// that whether a process of a higher class is around (RunAhead, run_ahead.h)
// is known without walking them. Part of the scheduler, and
// pure like it.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>

#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

class MemberClasses {
public:
    // A client of class `rank` (policy::class_rank) joins or leaves, busy or
    // idle since `last_active`.
    void add(int rank, bool busy, TimePoint last_active);
    void remove(int rank, bool busy, TimePoint last_active);
    bool empty() const { return classes_.empty(); }

    // Whether a client of a class ranked before `own` is busy, or is idle
    // and was active less than `release` before `now`. `recheck` becomes the
    // earliest time one such idle client stops counting, where that is
    // earlier than it was.
    bool higher_around(int own, TimePoint now, Duration release,
                       std::optional<TimePoint>& recheck) const;

private:
    struct Class {
        size_t count = 0;
        size_t busy = 0;
        std::multiset<TimePoint> idle;  // the idle ones' last_active
    };
    std::map<int, Class> classes_;
};

}  // namespace nvshare::daemon
