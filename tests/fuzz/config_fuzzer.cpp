// libFuzzer target for nvshare.conf(5)'s parser, parse_config() of
// daemon/settings.h (load_config_file() only reads the file around it).
//
// Besides the sanitizers, it checks what the parser promises: every value
// it keeps is in range, each bad line gives one error naming that line, and
// lines are independent: parsing the text in two halves and laying the
// second over the first gives the same settings and the same errors.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/settings.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using nvshare::daemon::ConfigParse;
using nvshare::daemon::parse_config;
using nvshare::daemon::SettingsLayer;

void check_values(const SettingsLayer& layer)
{
    using nvshare::daemon::valid_time_quantum;
    FUZZ_CHECK(!layer.time_quantum || valid_time_quantum(*layer.time_quantum));
    FUZZ_CHECK(!layer.grace || valid_time_quantum(*layer.grace));
    FUZZ_CHECK(!layer.log_waits_after || (layer.log_waits_after->count() >= 0 &&
                                          *layer.log_waits_after <= nvshare::kMaxTimeQuantum));
    FUZZ_CHECK(!layer.default_capacity || *layer.default_capacity > 0);
    for (const auto& [uuid, bytes] : layer.capacities)
        FUZZ_CHECK(!uuid.empty() && bytes > 0);
    for (const auto& [uuid, tq] : layer.gpu_time_quanta)
        FUZZ_CHECK(!uuid.empty() && valid_time_quantum(tq));
    for (const auto& [uuid, mode] : layer.gpu_modes)
        FUZZ_CHECK(!uuid.empty());
}

// The line number an error names ("line N: ...").
size_t error_line(const std::string& error)
{
    FUZZ_CHECK(error.rfind("line ", 0) == 0);
    size_t n = 0, i = 5;
    for (; i < error.size() && error[i] >= '0' && error[i] <= '9'; ++i)
        n = n * 10 + static_cast<size_t>(error[i] - '0');
    FUZZ_CHECK(i > 5 && error.compare(i, 2, ": ") == 0);
    return n;
}

std::string renumbered(const std::string& error, size_t offset)
{
    const size_t n = error_line(error);
    return "line " + std::to_string(n + offset) + error.substr(error.find(':'));
}

SettingsLayer overlay(SettingsLayer below, const SettingsLayer& above)
{
    if (above.mode)
        below.mode = above.mode;
    if (above.time_quantum)
        below.time_quantum = above.time_quantum;
    if (above.grace)
        below.grace = above.grace;
    if (above.log_waits_after)
        below.log_waits_after = above.log_waits_after;
    if (above.default_capacity)
        below.default_capacity = above.default_capacity;
    for (const auto& [uuid, bytes] : above.capacities)
        below.capacities[uuid] = bytes;
    for (const auto& [uuid, mode] : above.gpu_modes)
        below.gpu_modes[uuid] = mode;
    for (const auto& [uuid, tq] : above.gpu_time_quanta)
        below.gpu_time_quanta[uuid] = tq;
    // Priority rules are repeatable: every line adds one.
    below.priority_rules.insert(below.priority_rules.end(), above.priority_rules.begin(),
                                above.priority_rules.end());
    return below;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const ConfigParse whole = parse_config(text);
    check_values(whole.layer);

    const size_t lines = nvshare::fuzz::lines_of(text).size();
    size_t previous = 0;
    for (const auto& e : whole.errors) {
        const size_t n = error_line(e);
        FUZZ_CHECK(n > previous && n <= lines);
        previous = n;
    }

    // Lines are independent: cut at the newline nearest the middle.
    const size_t cut = text.find('\n', size / 2);
    if (cut == std::string_view::npos)
        return 0;
    const ConfigParse first = parse_config(text.substr(0, cut));
    const ConfigParse second = parse_config(text.substr(cut + 1));
    FUZZ_CHECK(overlay(first.layer, second.layer) == whole.layer);
    const size_t first_lines = nvshare::fuzz::lines_of(text.substr(0, cut + 1)).size();
    auto errors = first.errors;
    for (const auto& e : second.errors)
        errors.push_back(renumbered(e, first_lines));
    FUZZ_CHECK(errors == whole.errors);
    return 0;
}
