// The GPUs nvshared knows, indexed in the order it met them, and what is
// set for each by UUID (for GPUs not yet seen too): its capacity, its mode
// and its time quantum. Who may add a GPU and what a GPU's memory size is
// are decided here: the host's word (its GPU list, NVML) stands, root's
// claims next, another user's claims only where nothing is known and only
// for a few GPUs the host does not list. The scheduler owns one and adds
// what follows from a change (its queues, its room, its turn styles). Part
// of the scheduling core, pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/client.h"
#include "daemon/gpu.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

inline constexpr GpuIndex kMaxGpus = 64;
// The smallest GPU memory a client may claim: no GPU CUDA 13 runs on has less.
inline constexpr uint64_t kMinGpuMemory = uint64_t{256} << 20;
// GPUs the host does not list (in /proc/driver/nvidia/gpus) that one user's
// clients may add to the table; root is not limited.
inline constexpr size_t kMaxUnlistedGpusPerUser = 4;

class GpuTable {
public:
    // A GPU found or added; `added`: it is new (the last index).
    struct Found {
        GpuIndex gpu;
        bool added;
        // Its capacity was set anew from its memory size (it follows the
        // size: no capacity is configured for it).
        bool capacity_set = false;
    };

    // Finds or adds a GPU the host lists (trusted, its memory size too
    // where given: NVML's); nullopt when kMaxGpus are known already.
    std::optional<Found> ensure(const GpuDescription& description);
    // Finds or adds a GPU named in the Hello of a client of user `uid`
    // (`principal`: whom it counts against, principals.h). A claimed memory
    // size outside [kMinGpuMemory, kMaxReportedBytes] is refused; the size
    // stands only where nothing better is known: a root client's claim sets
    // it for good unless the host gave it, another user's only while no
    // size is known at all. A GPU the host does not list counts against
    // the principal's kMaxUnlistedGpusPerUser. `refusal` says why when
    // nullopt is returned.
    std::optional<Found> claim(const GpuDescription& description, uint32_t uid, uint32_t principal,
                               std::string* refusal);

    // Capacity for GPUs not yet seen: by UUID, else the default, else the
    // memory size.
    void set_capacity_override(const std::string& uuid, uint64_t bytes);
    void set_default_capacity(std::optional<uint64_t> bytes);
    // A known GPU's capacity, kept for its UUID. False for an unknown GPU.
    bool set_capacity(GpuIndex gpu, uint64_t bytes);

    // A GPU's own mode or time quantum; nullopt: it follows the host-wide
    // setting again.
    void set_mode(const std::string& uuid, std::optional<Mode> mode);
    void set_time_quantum(const std::string& uuid, std::optional<Duration> tq);
    // Its own, else `host_wide`.
    Mode mode_of(GpuIndex gpu, Mode host_wide) const;
    Duration time_quantum_of(GpuIndex gpu, Duration host_wide) const;
    const std::map<std::string, Mode>& modes() const { return modes_; }
    const std::map<std::string, Duration>& time_quanta() const { return quanta_; }

    size_t size() const { return gpus_.size(); }
    const std::vector<Gpu>& gpus() const { return gpus_; }
    // Who holds it and what it counts are the scheduler's to change.
    Gpu& operator[](GpuIndex gpu) { return gpus_[gpu]; }
    const Gpu& operator[](GpuIndex gpu) const { return gpus_[gpu]; }

private:
    std::optional<GpuIndex> find(const std::string& uuid) const;
    std::optional<GpuIndex> add(const GpuDescription& description);
    bool capacity_follows_size(GpuIndex gpu) const;
    // A GPU's memory size, and its capacity where it follows the size.
    bool set_memory_size(GpuIndex gpu, uint64_t bytes, bool confirmed);

    std::vector<Gpu> gpus_;
    std::map<std::string, uint64_t> capacities_;
    std::optional<uint64_t> default_capacity_;
    std::map<std::string, Mode> modes_;
    std::map<std::string, Duration> quanta_;
};

}  // namespace nvshare::daemon
