#include "preload/swap/switch_policy.h"

#include "preload/swap/tuning.h"

namespace nvshare::preload::swap {

namespace {

// An allocation that waits for room while our work cannot be drained (a
// capture, stuck work) is looked at again this often.
constexpr uint64_t kRoomRetryNs = 20 * tuning::kMs;

}  // namespace

void SwitchPolicy::granted()
{
    prestaging_ = true;
    next_likely_look_ = 0;
    room_wanted_ = false;  // the grant's swap-in gives the memory
    shrink_keep_ = UINT64_MAX;
    waits_oversubscribed_ = false;
}

void SwitchPolicy::shrunk(uint64_t keep_bytes)
{
    shrink_keep_ = keep_bytes;
    prestaging_ = true;  // the holder may grow on: make host memory ahead
}

void SwitchPolicy::waits_oversubscribed()
{
    if (waits_oversubscribed_)
        return;
    waits_oversubscribed_ = true;
    prestaging_ = true;  // the holder may ask us for room
}

void SwitchPolicy::contended()
{
    prestaging_ = true;  // what may stay has changed
    next_likely_look_ = 0;
}

void SwitchPolicy::memory_changed(uint64_t now)
{
    memory_changed_at_ = now;
    prestaging_ = true;  // new memory may need host memory made ahead
}

bool SwitchPolicy::room_due(const Facts& f) const
{
    // Not holding: the next grant gives the memory.
    return room_wanted_ && f.hold == Hold::Running && f.now >= next_room_try_;
}

void SwitchPolicy::room_tried(bool done, uint64_t now)
{
    if (done)
        room_wanted_ = false;
    else
        next_room_try_ = now + kRoomRetryNs;
}

void SwitchPolicy::observe(const Facts& f)
{
    if (f.hold != Hold::Running || f.stranded == 0)
        stranded_since_ = 0;
    else if (stranded_since_ == 0)
        stranded_since_ = f.now;
}

uint64_t SwitchPolicy::idle_hold(const Facts& f, uint64_t gaps_hold, uint64_t period) const
{
    // nvshared asks the others to make room for memory that found none
    // (Shrink); where none came for a while, letting go makes the other
    // holder leave room, so that a switch costs nothing extra.
    const bool stranded_long =
        stranded_since_ != 0 && f.now - stranded_since_ >= tuning::kStrandedPatienceNs;
    return stranded_long ? period : gaps_hold;
}

bool SwitchPolicy::holds_contended(const Facts& f) const
{
    return f.hold == Hold::Running && f.contended && f.oversubscribed;
}

uint64_t SwitchPolicy::prestage_at() const
{
    const uint64_t settled = memory_changed_at_ + tuning::kSettleBeforePrestageNs;
    return settled > next_likely_look_ ? settled : next_likely_look_;
}

// While we hold an oversubscribed GPU that others wait for, the host memory
// our next swap-outs copy into (for a next holder as big as we are: a
// starting one asks for room as it grows) is made ahead, a step at a time,
// while the program's work runs: pinning it costs about ten times the copy;
// but only once such a swap-out is likely: a pause of ours has outlasted our
// share of a switch with that memory made (we would let go in such a pause),
// or our quantum's end is near. Made for a switch that never comes, it stays
// pinned, and the process's exit unpins it before the driver gives its
// device memory back (bench/README.md, driver_probes.py unpin), which the
// next holder waits for: a holder whose pauses are shorter than a switch
// and whose work ends within its quantum made tens of GiB for nothing.
// Likewise, while we wait for an oversubscribed GPU, for kShrinkAhead of
// what we left there (beyond what nvshared asked for, if it did): a holder
// that grows asks us for room, and its work runs over the bus until we give
// it. Neither while the host runs low on memory: what it has left goes to
// the swap-outs that give room. A holder still allocating makes none yet:
// each step would hold up its next allocation's wait for room, and its
// pinning slows that of those who give the room. While a swap-in or a drop
// moves memory the wish ends: a swap-in keeps the host memory its data came
// from, and a drop's swap-out makes what it still needs.
bool SwitchPolicy::prestage_pending(const Facts& f) const
{
    // A holder waits for its memory to settle; next_wake comes back for it.
    return prestaging_ && !(holds_contended(f) && f.now < prestage_at());
}

PrestageStep SwitchPolicy::prestage(const Facts& f)
{
    if (!prestage_pending(f))
        return {};
    if (f.host_low) {
        prestaging_ = false;  // the swap-outs that give room come first
    } else if (holds_contended(f)) {
        if (f.switch_likely)
            return {Prestage::ForSwitch, 0};
        // Not yet: looked at again a while later, or when it comes.
        const uint64_t look = f.now + tuning::kPauseLookNs;
        next_likely_look_ = look < f.switch_likely_at ? look : f.switch_likely_at;
    } else if (f.hold == Hold::None && shrink_keep_ != UINT64_MAX) {
        return {Prestage::ToKeep,
                shrink_keep_ > tuning::kShrinkAhead ? shrink_keep_ - tuning::kShrinkAhead : 0};
    } else if (f.hold == Hold::None && waits_oversubscribed_) {
        return {Prestage::Ahead, tuning::kShrinkAhead};
    } else {
        prestaging_ = false;
    }
    return {};
}

// While we hold the GPU, memory that found no room on the device moves there
// as soon as the driver has room (the previous holder, or one that ended,
// gave it back).
bool SwitchPolicy::promote_due(const Facts& f)
{
    if (f.hold != Hold::Running || f.now < next_promote_check_)
        return false;
    next_promote_check_ = f.now + tuning::kPromotePollNs;
    return f.stranded != 0 && !f.captures;
}

uint64_t SwitchPolicy::next_wake(const Facts& f) const
{
    uint64_t next = UINT64_MAX;
    auto consider = [&](uint64_t t) { next = t < next ? t : next; };
    if (prestaging_ && f.hold != Hold::Moving)
        consider(f.hold == Hold::Running ? prestage_at() : f.now);  // the next step
    if (f.hold == Hold::Running && f.stranded != 0)
        consider(next_promote_check_);
    if (f.hold == Hold::Running && room_wanted_)
        consider(next_room_try_);
    return next;
}

}  // namespace nvshare::preload::swap
