#include "preload/lock/admission.h"

#include "preload/lock/gate.h"
#include "preload/swap/swappable.h"

namespace nvshare::preload::lock {

bool open_gate()
{
    return swappable::open_if_mapped(gate_open);
}

bool open_gate_and_count()
{
    return swappable::open_if_mapped(gate_open_and_count);
}

}  // namespace nvshare::preload::lock
