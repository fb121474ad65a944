#include "daemon/claim_grace.h"

#include <algorithm>

namespace nvshare::daemon {

uint64_t ClaimGrace::counted(uint64_t claim, uint64_t confirmed, TimePoint now, ClaimTurn turn,
                             bool may_start)
{
    confirmed = std::min(confirmed, claim);
    if (until_ && !turn_over_ && turn != ClaimTurn::None) {
        until_ = std::max(*until_, now + kClaimGrace);
        turn_over_ = turn == ClaimTurn::Granted;
    }
    if (until_ && now >= *until_)
        until_.reset();
    if (owed_ != 0 && confirmed >= owed_)
        owed_ = 0;  // what the last grace covered is where the host sees it
    if (!until_ && confirmed < claim && owed_ == 0 && may_start) {
        until_ = now + kClaimGrace;
        turn_over_ = turn == ClaimTurn::Granted;
    }
    if (!until_)
        return confirmed;
    // Within the grace all of it counts, and the host owes the most of it.
    owed_ = std::max(owed_, claim);
    if (confirmed >= owed_)
        owed_ = 0;
    return claim;
}

void ClaimGrace::left_line()
{
    if (until_)
        turn_over_ = true;
}

}  // namespace nvshare::daemon
