// libFuzzer target for what nvshared renders from clients' data: arbitrary
// bytes as command and GPU names (through printable_utf8, as the server
// takes them in), arbitrary GPU claims, memory and swap reports (through the
// scheduler's bounds), then the status text and the strings D-Bus replies
// carry.
//
// Properties: nothing throws; the status is JSON that parses and keeps to
// its size limit, saying how many clients it left out; every string bound for
// D-Bus serializes (sd-bus refuses invalid UTF-8, which once cost the daemon
// its bus); the memory a GPU's clients requested is the sum of what they
// report (no wrap-around).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "common/uuid.h"
#include "daemon/printable_text.h"
#include "daemon/scheduler.h"
#include "daemon/status.h"
#include "tests/fuzz/fuzz_check.h"
#if NVSHARE_FUZZ_DBUS
#include <sdbus-c++/sdbus-c++.h>
#endif

namespace {

using namespace nvshare;
using namespace nvshare::daemon;

void check_bus_string(const std::string& s)
{
#if NVSHARE_FUZZ_DBUS
    try {
        sdbus::Variant v(s);  // serialized by sd-bus, as a reply would be
    } catch (const sdbus::Error&) {
        FUZZ_CHECK(!"a string bound for D-Bus does not serialize");
    }
#else
    (void)s;
#endif
}

std::string raw_field(FuzzedDataProvider& in, size_t size)
{
    std::string s = in.ConsumeBytesAsString(size);
    s.resize(size, '\0');
    return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    FuzzedDataProvider in(data, size);
    Scheduler s;
    auto now = Clock::time_point{} + std::chrono::hours(1);
    ClientId next = 1;
    while (in.remaining_bytes() > 0) {
        now += std::chrono::milliseconds(in.ConsumeIntegral<uint16_t>());
        const ClientId some = in.ConsumeIntegralInRange<ClientId>(1, next);
        switch (in.ConsumeIntegralInRange(0, 6)) {
            case 0: {  // a Hello
                const std::string comm = raw_field(in, proto::kCommBytes);
                const uint32_t uid = in.ConsumeIntegralInRange<uint32_t>(0, 3);
                std::vector<GpuIndex> gpus;
                const int count = in.ConsumeIntegralInRange(0, 3);
                for (int i = 0; i < count; ++i) {
                    uint8_t uuid[16] = {};
                    uuid[15] = in.ConsumeIntegral<uint8_t>();
                    char text[kUuidTextSize];
                    format_gpu_uuid(uuid, text);
                    const std::string name = raw_field(in, proto::kGpuNameBytes);
                    std::string refusal;
                    const auto g = s.claim_gpu({text, printable_utf8(name.data(), name.size()),
                                                in.ConsumeIntegral<uint64_t>()},
                                               uid, now, &refusal);
                    FUZZ_CHECK(g || !refusal.empty());
                    if (g && std::find(gpus.begin(), gpus.end(), *g) == gpus.end())
                        gpus.push_back(*g);
                }
                s.connect(next++, {1, uid, printable_utf8(comm.data(), comm.size())}, gpus);
                break;
            }
            case 1:
                s.report_memory(some, in.ConsumeIntegralInRange<GpuIndex>(0, 4),
                                {in.ConsumeIntegral<uint64_t>(), in.ConsumeIntegral<uint64_t>()},
                                now);
                break;
            case 2: {
                SwapStats st;
                st.swap_ins = in.ConsumeIntegral<uint64_t>();
                st.swap_in_time = std::chrono::microseconds(in.ConsumeIntegralInRange<int64_t>(
                    0, static_cast<int64_t>(kMaxReportedMicroseconds) + 1));
                st.bytes_prefetched = in.ConsumeIntegral<uint64_t>();
                s.report_swaps(some, in.ConsumeIntegralInRange<GpuIndex>(0, 4), st, now);
                break;
            }
            case 3:
                s.request(some, in.ConsumeIntegral<uint8_t>(), now);
                break;
            case 4:
                s.release(some, in.ConsumeIntegral<uint8_t>(), now);
                break;
            case 5:
                s.disconnect(some, now);
                break;
            case 6:
                s.tick(now);
                break;
        }
        s.take_actions();
    }

    // The requested totals are exact sums of bounded reports: what each
    // report counts for others (MemoryUse::shared), no claim beyond the GPU.
    for (GpuIndex g = 0; g < s.gpus().size(); ++g) {
        uint64_t sum = 0;
        for (const auto& [id, c] : s.clients())
            if (auto it = c.memory.find(g); it != c.memory.end())
                sum += it->second.shared();
        FUZZ_CHECK(s.requested_memory(g) == sum);
    }

    constexpr size_t kLimit = 2048;
    const std::string text = status_text(s, s.clients().size(), now, kLimit);
    FUZZ_CHECK(text.size() <= kLimit || s.clients().empty());
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    FUZZ_CHECK(!doc.is_discarded());
    FUZZ_CHECK(doc["clients"].size() + doc["clients_omitted"].get<size_t>() == s.clients().size());
    for (const auto& [id, c] : s.clients())
        check_bus_string(c.info.comm);
    for (const Gpu& g : s.gpus()) {
        check_bus_string(g.description.name);
        check_bus_string(g.description.uuid);
    }
    return 0;
}
