#include "daemon/member_classes.h"

#include <algorithm>

namespace nvshare::daemon {

void MemberClasses::add(int rank, bool busy, TimePoint last_active)
{
    Class& c = classes_[rank];
    c.count++;
    if (busy)
        c.busy++;
    else
        c.idle.insert(last_active);
}

void MemberClasses::remove(int rank, bool busy, TimePoint last_active)
{
    const auto it = classes_.find(rank);
    if (it == classes_.end())
        return;
    Class& c = it->second;
    if (busy) {
        c.busy--;
    } else if (const auto i = c.idle.find(last_active); i != c.idle.end()) {
        c.idle.erase(i);
    }
    if (--c.count == 0)
        classes_.erase(it);
}

bool MemberClasses::higher_around(int own, TimePoint now, Duration release,
                                  std::optional<TimePoint>& recheck) const
{
    bool higher = false;
    for (auto it = classes_.begin(); it != classes_.end() && it->first < own; ++it) {
        const Class& c = it->second;
        higher |= c.busy > 0;
        // The idle ones count while now < last_active + release; the first
        // of them to stop counting is the one idle longest.
        const auto counting = c.idle.upper_bound(now - release);
        if (counting == c.idle.end())
            continue;
        higher = true;
        const TimePoint until = *counting + release;
        recheck = std::min(recheck.value_or(until), until);
    }
    return higher;
}

}  // namespace nvshare::daemon
