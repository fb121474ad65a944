#include "deviceplugin/preferred_allocation.h"

#include <set>
#include <unordered_map>
#include <unordered_set>

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
    std::vector<std::string_view> free;
    size_t next = 0;
    size_t chosen = 0;
    size_t left() const { return free.size() - next; }
};

}  // namespace

std::vector<std::string> preferred_allocation(const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              size_t size, Policy policy)
{
    std::vector<std::string> result(must_include.begin(), must_include.end());
    const std::unordered_set<std::string_view> taken(must_include.begin(), must_include.end());
    // The GPUs in the order first offered; each ID is looked up once.
    std::vector<GpuShares> gpus;
    std::unordered_map<std::string_view, size_t> index;
    const auto gpu = [&gpus, &index](std::string_view uuid) -> GpuShares& {
        const auto [it, added] = index.try_emplace(uuid, gpus.size());
        if (added)
            gpus.push_back(GpuShares{uuid, {}, 0, 0});
        return gpus[it->second];
    };
    for (const std::string& id : available)
        if (!taken.contains(id))
            gpu(gpu_of_share(id)).free.push_back(id);
    for (const std::string& id : must_include)
        gpu(gpu_of_share(id)).chosen++;
    // The GPU to take the next share from comes first: spread, the fewest
    // chosen; pack, the most; then the most left, then the first offered.
    // Only the picked GPU's place changes, so each pick costs a logarithm.
    const auto before = [&gpus, policy](size_t a, size_t b) {
        const GpuShares& x = gpus[a];
        const GpuShares& y = gpus[b];
        if (x.chosen != y.chosen)
            return policy == Policy::Spread ? x.chosen < y.chosen : x.chosen > y.chosen;
        if (x.left() != y.left())
            return x.left() > y.left();
        return a < b;
    };
    std::set<size_t, decltype(before)> order(before);
    for (size_t g = 0; g < gpus.size(); ++g)
        if (gpus[g].left() > 0)
            order.insert(g);
    while (result.size() < size && !order.empty()) {  // fewer offered: the kubelet decides
        const size_t g = *order.begin();
        order.erase(order.begin());
        GpuShares& pick = gpus[g];
        result.emplace_back(pick.free[pick.next++]);
        pick.chosen++;
        if (pick.left() > 0)
            order.insert(g);
    }
    return result;
}

}  // namespace nvshare::deviceplugin
