#include "preload/lock/admission.h"

#include "preload/lock/gate.h"
#include "preload/memory/devices.h"
#include "preload/memory/swappable.h"

namespace nvshare::preload::lock {

namespace {

bool every_chunk_mapped()
{
    bool mapped = true;
    for (uint32_t i = 0; i < devices::count(); ++i)
        mapped &= swappable::map_absent(i);
    return mapped;
}

}  // namespace

bool open_gate()
{
    if (!every_chunk_mapped())
        return false;
    gate_open();
    return true;
}

bool open_gate_and_count()
{
    if (!every_chunk_mapped())
        return false;
    gate_open_and_count();
    return true;
}

}  // namespace nvshare::preload::lock
