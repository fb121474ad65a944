#include "preload/swap/wish_ledger.h"

namespace nvshare::preload::maker {

void WishLedger::ask(const Wish& w, bool finished_at_once)
{
    wish_ = w;
    ++asked_;
    told_ = false;
    if (w.gpus == 0 || finished_at_once) {
        done_ = asked_;  // nothing to make, or no maker to make it
        told_ = true;
    }
}

bool WishLedger::want(const Wish& w, bool can_make)
{
    const bool done = done_ == asked_;
    if (w.gpus == 0) {
        if (wish_.gpus != 0)
            ask(w, true);
        return false;
    }
    if (!(w == wish_) || (done && told_)) {
        ask(w, !can_make);  // a new wish, or the same asked again once done
        return !told_;
    }
    if (done) {
        told_ = true;  // the maker finished it: said once
        return false;
    }
    return true;
}

bool WishLedger::pending(uint64_t* asked, Wish* w) const
{
    if (done_ == asked_)
        return false;
    *asked = asked_;
    *w = wish_;
    return true;
}

bool WishLedger::finished(uint64_t asked)
{
    if (asked != asked_)
        return false;
    done_ = asked;
    return true;
}

}  // namespace nvshare::preload::maker
