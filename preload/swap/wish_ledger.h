// What the client thread wishes the maker thread to make ahead (maker.h),
// and how far the maker is with it. Pure bookkeeping, under the maker's
// mutex: wishes in, the wish to work on and whether it is still being made
// out.
#pragma once

#include <cstdint>

#include "preload/memory/devices.h"
#include "preload/swap/swappable.h"

namespace nvshare::preload::maker {

// Host memory to make ahead: for each GPU of `gpus`, what a swap-out that
// keeps `keep` there will move, in `order`.
struct Wish {
    uint64_t gpus = 0;                      // devices:: indices; none: stop
    uint64_t keep[devices::kMaxGpus] = {};  // what a swap-out keeps there
    swappable::MakeOrder order = swappable::MakeOrder::LeavingFirst;
    bool operator==(const Wish&) const = default;
};

class WishLedger {
public:
    // The client thread wishes `w` (none: stop after the step in hand).
    // True while the maker is at it; false once it finished, said once: the
    // same wish after that is asked anew (memory may have changed since).
    // `can_make`: the maker thread runs; where it does not, a wish is
    // finished at once (the swap-outs make their memory as they go).
    bool want(const Wish& w, bool can_make);
    // The wish the maker should work on, and its number: false if none.
    bool pending(uint64_t* asked, Wish* w) const;
    // Whether wish number `asked` is still the latest (the maker stops its
    // steps as soon as it is not).
    bool current(uint64_t asked) const { return asked == asked_; }
    // The maker finished wish number `asked`; true if it is still the
    // latest (the client thread is then told at its next want()).
    bool finished(uint64_t asked);

private:
    void ask(const Wish& w, bool finished_at_once);

    Wish wish_;
    uint64_t asked_ = 0;  // wishes so far
    uint64_t done_ = 0;   // the latest the maker finished
    bool told_ = true;    // want() has said that the latest is finished
};

}  // namespace nvshare::preload::maker
