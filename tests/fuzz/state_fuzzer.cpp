// libFuzzer target for the runtime-state file's parser, parse_state() of
// daemon/settings.h (StateStore::load() only reads the file around it).
//
// Besides the sanitizers (and uncaught JSON exceptions, which would kill
// the daemon), it checks what the parser promises: a rejected file yields no
// settings at all, an accepted one only in-range values of the kinds the
// state holds, and what is accepted survives serialize_state() and a second
// parse unchanged.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/settings.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace nvshare::daemon;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const StateParse parsed = parse_state(text);
    if (parsed.error) {
        FUZZ_CHECK(!parsed.error->empty());
        FUZZ_CHECK(parsed.layer.empty());
        return 0;
    }
    const SettingsLayer& layer = parsed.layer;
    // The state file holds mode, time quantum and capacities, nothing else.
    FUZZ_CHECK(!layer.grace && !layer.default_capacity);
    FUZZ_CHECK(!layer.time_quantum || valid_time_quantum(*layer.time_quantum));
    for (const auto& [uuid, bytes] : layer.capacities)
        FUZZ_CHECK(!uuid.empty() && bytes > 0);

    const std::string saved = serialize_state(layer);
    const StateParse again = parse_state(saved);
    FUZZ_CHECK(!again.error);
    FUZZ_CHECK(again.layer == layer);
    FUZZ_CHECK(serialize_state(again.layer) == saved);
    return 0;
}
