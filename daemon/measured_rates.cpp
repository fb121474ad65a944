#include "daemon/measured_rates.h"

#include <nlohmann/json.hpp>

namespace nvshare::daemon {

MeasuredRates rates_from_wire(const proto::RatesPayload& p)
{
    return {p.engine_out, p.engine_in, p.evict, p.prefetch, p.host_pin};
}

proto::RatesPayload rates_to_wire(const MeasuredRates& r, uint32_t gpu)
{
    return {gpu, 0, r.engine_out, r.engine_in, r.evict, r.prefetch, r.host_pin};
}

bool plausible(const MeasuredRates& r)
{
    bool ok = true;
    for_each_figure(r, [&ok](const char*, uint64_t v) {
        ok = ok && (v == 0 || (v >= proto::kMinRate && v <= proto::kMaxRate));
    });
    return ok;
}

bool merge(MeasuredRates& known, const MeasuredRates& report)
{
    bool learned = false;
    const auto take = [&learned](uint64_t& k, uint64_t r) {
        if (r == 0)
            return;
        learned = learned || k == 0;
        k = r;
    };
    take(known.engine_out, report.engine_out);
    take(known.engine_in, report.engine_in);
    take(known.evict, report.evict);
    take(known.prefetch, report.prefetch);
    take(known.host_pin, report.host_pin);
    return learned;
}

nlohmann::json rates_json(const MeasuredRates& r)
{
    nlohmann::json j = nlohmann::json::object();
    for_each_figure(r, [&j](const char* name, uint64_t v) { j[name] = v; });
    return j;
}

std::optional<MeasuredRates> rates_from_json(const nlohmann::json& j)
{
    if (!j.is_object())
        return std::nullopt;
    MeasuredRates r;
    bool ok = true;
    for_each_figure(r, [&](const char* name, uint64_t& v) {
        const auto it = j.find(name);
        if (it == j.end() || !it->is_number_unsigned()) {
            ok = false;
            return;
        }
        v = it->get<uint64_t>();
    });
    if (!ok || !plausible(r))
        return std::nullopt;
    return r;
}

}  // namespace nvshare::daemon
