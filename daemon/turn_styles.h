// How the clients of each GPU share it (Turns), from its mode and whether
// their memory fits, and the GPUs of each style: each GPU in one. The
// scheduler works the styles out again where a mode or a GPU's memory
// changed (update) and asks which GPUs are taken how. Part of the
// scheduling core, pure.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "daemon/client.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

enum class Turns : uint8_t {
    Free,    // off: they all run at once, unscheduled
    Soft,    // auto, their memory fits: turns at the end of bursts, and a
             // waiter joins the holders when waiting would cost more
    Groups,  // auto, their memory exceeds the capacity: turns of groups
             // whose memory fits together
    Strict,  // on: one holder at a time
};
inline constexpr size_t kTurnStyles = 4;

class TurnStyles {
public:
    // The style of a GPU in `mode` whose clients' memory does or does not
    // exceed its capacity.
    static Turns style(Mode mode, bool oversubscribed);

    struct Change {
        bool any = false;              // a GPU's style changed
        GpuSet became_serialized = 0;  // GPUs now Strict or Groups that were not
    };
    // Every GPU's style again: style_of(g) for each GPU g below `count`.
    template <typename StyleOf>
    Change update(GpuIndex count, StyleOf&& style_of)
    {
        const auto before = by_style_;
        const GpuSet serialized_before = serialized();
        by_style_ = {};
        for (GpuIndex g = 0; g < count; ++g)
            by_style_[static_cast<size_t>(style_of(g))] |= gpu_bit(g);
        return {by_style_ != before, serialized() & ~serialized_before};
    }

    // A GPU's style (Free: a GPU it does not know).
    Turns of(GpuIndex gpu) const;
    // Whether it is taken one holder or one group at a time.
    bool serializing(GpuIndex gpu) const;
    // The GPUs of these styles; those taken one holder or group at a time
    // (Strict, Groups); those taken in turns of any kind (all but Free).
    GpuSet with(std::initializer_list<Turns> styles) const;
    GpuSet serialized() const { return with({Turns::Strict, Turns::Groups}); }
    GpuSet scheduled() const { return with({Turns::Soft, Turns::Groups, Turns::Strict}); }

private:
    std::array<GpuSet, kTurnStyles> by_style_{};
};

}  // namespace nvshare::daemon
