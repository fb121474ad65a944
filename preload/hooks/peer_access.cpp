// Peer access between GPUs of one process: a context that enables access to
// another GPU's context may reach that GPU's cuMemAlloc memory. The swap
// engine's memory (swappable.h) is VMM memory, which the driver's peer
// access does not cover: each enable and disable that the driver accepts is
// passed on to the engine, which grants (or takes back) the peer's access to
// the chunks mapped now and to every chunk it maps later.
#include "preload/driver/hook_table.h"
#include "preload/env.h"
#include "preload/log.h"
#include "preload/memory/contexts.h"
#include "preload/memory/devices.h"
#include "preload/swap/swappable.h"

namespace {

namespace p = nvshare::preload;

void pass_on(CUcontext peer_context, bool enabled)
{
    const int accessing = p::contexts::current_device();
    const int owner = p::contexts::device_of(peer_context);
    if (accessing < 0 || owner < 0)
        return;
    const int gpu = p::devices::index_of(owner, true);
    if (gpu < 0)
        return;
    if (!p::swappable::set_peer(static_cast<uint32_t>(gpu), accessing, enabled))
        p::log_warn(
            "GPU %d could not %s access to this process's memory of GPU %d: peer work "
            "on it may fail",
            accessing, enabled ? "be given" : "give up", owner);
    else
        p::log_debug("GPU %d %s access to this process's memory of GPU %d", accessing,
                     enabled ? "has" : "no longer has", owner);
}

}  // namespace

NVS_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    auto real = NVS_REAL(cuCtxEnablePeerAccess);
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    const CUresult r = real(peerContext, Flags);
    if (r == CUDA_SUCCESS && !p::config().disabled)
        pass_on(peerContext, true);
    return r;
}

NVS_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    auto real = NVS_REAL(cuCtxDisablePeerAccess);
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    const CUresult r = real(peerContext);
    if (r == CUDA_SUCCESS && !p::config().disabled)
        pass_on(peerContext, false);
    return r;
}
