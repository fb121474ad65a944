#include "deviceplugin/preferred_allocation.h"

#include <algorithm>
#include <set>

#include "deviceplugin/share_id.h"

namespace nvshare::deviceplugin {

std::optional<Policy> parse_policy(std::string_view name)
{
    if (name == "spread")
        return Policy::Spread;
    if (name == "pack")
        return Policy::Pack;
    return std::nullopt;
}

namespace {

// One GPU's shares still free to choose, and how many of its shares are
// already chosen.
struct GpuShares {
    std::string_view uuid;
    std::vector<std::string> free;
    size_t next = 0;
    size_t chosen = 0;
    size_t left() const { return free.size() - next; }
};

// Whether `a` is the better GPU to take the next share from.
bool better(const GpuShares& a, const GpuShares& b, Policy policy)
{
    if (a.chosen != b.chosen)
        return policy == Policy::Spread ? a.chosen < b.chosen : a.chosen > b.chosen;
    return a.left() > b.left();  // equal: keep the earlier (callers scan in order)
}

}  // namespace

std::vector<std::string> preferred_allocation(const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              size_t size, Policy policy)
{
    std::vector<std::string> result(must_include.begin(), must_include.end());
    const std::set<std::string> taken(must_include.begin(), must_include.end());
    std::vector<GpuShares> gpus;
    const auto gpu = [&gpus](std::string_view uuid) -> GpuShares& {
        for (GpuShares& g : gpus)
            if (g.uuid == uuid)
                return g;
        return gpus.emplace_back(GpuShares{uuid, {}, 0, 0});
    };
    for (const std::string& id : available)
        if (!taken.contains(id))
            gpu(gpu_of_share(id)).free.push_back(id);
    for (const std::string& id : must_include)
        gpu(gpu_of_share(id)).chosen++;
    while (result.size() < size) {
        GpuShares* pick = nullptr;
        for (GpuShares& g : gpus)
            if (g.left() > 0 && (pick == nullptr || better(g, *pick, policy)))
                pick = &g;
        if (pick == nullptr)
            break;  // fewer offered than asked: the kubelet decides
        result.push_back(pick->free[pick->next++]);
        pick->chosen++;
    }
    return result;
}

}  // namespace nvshare::deviceplugin
