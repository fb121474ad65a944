#include "daemon/settings.h"

#include <nlohmann/json.hpp>

#include "common/mode.h"
#include "common/text.h"
#include "common/units.h"

namespace nvshare::daemon {

namespace {

constexpr int kStateVersion = 1;

// Shared by the config file and the state file; nullopt + *error if invalid.
std::optional<Duration> checked_duration(std::string_view text, const char* what,
                                         std::string* error)
{
    const auto d = parse_duration(text);
    if (!d || !valid_time_quantum(*d)) {
        *error = std::string("invalid ") + what + " '" + std::string(text) +
                 "' (valid: " + kTimeQuantumRange + ", e.g. 30s, 500ms, 2min)";
        return std::nullopt;
    }
    return *d;
}

// A setting with a host-wide value and GPUs' own, "[UUID=]VALUE" (as for
// --capacity): `parse` checks VALUE (setting *error when it is invalid).
template <typename T, typename Parse>
bool parse_host_or_gpu(std::string_view text, const char* what, std::optional<T>& host,
                       std::map<std::string, T>& by_gpu, Parse&& parse, std::string* error)
{
    const GpuSetting setting = split_gpu_setting(text);
    if (setting.uuid && setting.uuid->empty()) {
        *error = std::string(what) + " '" + std::string(text) + "' names no GPU before '='";
        return false;
    }
    const std::optional<T> value = parse(setting.value);
    if (!value)
        return false;
    if (setting.uuid)
        by_gpu[*setting.uuid] = *value;
    else
        host = *value;
    return true;
}

bool parse_config_line(std::string_view key, std::string_view value, const NameLookup& names,
                       SettingsLayer& layer, std::string* error)
{
    if (key == "time-quantum")
        return parse_host_or_gpu(
            value, "time quantum", layer.time_quantum, layer.gpu_time_quanta,
            [error](std::string_view v) { return checked_duration(v, "time quantum", error); },
            error);
    if (key == "grace") {
        const auto d = checked_duration(value, "grace period", error);
        if (d)
            layer.grace = d;
        return d.has_value();
    }
    if (key == "anti-thrashing")
        return parse_host_or_gpu(
            value, "anti-thrashing mode", layer.mode, layer.gpu_modes,
            [error](std::string_view v) {
                const auto m = parse_mode(v);
                if (!m)
                    *error = "invalid anti-thrashing mode '" + std::string(v) +
                             "' (valid: on, off, auto)";
                return m;
            },
            error);
    if (key == "capacity")
        return parse_host_or_gpu(
            value, "capacity", layer.default_capacity, layer.capacities,
            [error, value](std::string_view v) -> std::optional<uint64_t> {
                const auto size = parse_size(v);
                if (!size || !valid_capacity(*size)) {
                    *error = "invalid capacity '" + std::string(value) + "' (valid: [UUID=]SIZE, " +
                             kCapacityRange + ", e.g. 16G or GPU-...=8G)";
                    return std::nullopt;
                }
                return size;
            },
            error);
    if (key == "log-waits-after") {
        const auto d = parse_duration(value);
        if (!d || !valid_wait_log_threshold(*d)) {
            *error = "invalid log-waits-after '" + std::string(value) +
                     "' (valid: " + kWaitLogRange + ", e.g. 1s, 500ms, 0 for every wait)";
            return false;
        }
        layer.log_waits_after = *d;
        return true;
    }
    if (key == "priority") {
        auto rule = parse_priority_rule(value, names, error);
        if (rule)
            layer.priority_rules.push_back(std::move(*rule));
        return rule.has_value();
    }
    *error = "unknown setting '" + std::string(key) +
             "' (known: time-quantum, anti-thrashing, grace, capacity, log-waits-after, priority)";
    return false;
}

}  // namespace

bool SettingsLayer::empty() const
{
    return !mode && !time_quantum && !grace && !log_waits_after && !default_capacity &&
           capacities.empty() && priority_rules.empty() && gpu_modes.empty() &&
           gpu_time_quanta.empty();
}

void merge_layer(SettingsLayer& base, const SettingsLayer& top)
{
    auto take = [](auto& into, const auto& from) {
        if (from)
            into = from;
    };
    take(base.mode, top.mode);
    take(base.time_quantum, top.time_quantum);
    take(base.grace, top.grace);
    take(base.log_waits_after, top.log_waits_after);
    take(base.default_capacity, top.default_capacity);
    for (const auto& [uuid, bytes] : top.capacities)
        base.capacities[uuid] = bytes;
    base.priority_rules.insert(base.priority_rules.end(), top.priority_rules.begin(),
                               top.priority_rules.end());
    for (const auto& [uuid, mode] : top.gpu_modes)
        base.gpu_modes[uuid] = mode;
    for (const auto& [uuid, tq] : top.gpu_time_quanta)
        base.gpu_time_quanta[uuid] = tq;
}

GpuSetting split_gpu_setting(std::string_view text)
{
    const auto eq = text.find('=');
    if (eq == std::string_view::npos)
        return {std::nullopt, trim(text)};
    return {std::string(trim(text.substr(0, eq))), trim(text.substr(eq + 1))};
}

ConfigParse parse_config(std::string_view text, const NameLookup& names)
{
    ConfigParse result;
    size_t line_number = 0;
    while (!text.empty()) {
        const auto newline = text.find('\n');
        std::string_view line = text.substr(0, newline);
        text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
        ++line_number;
        if (const auto hash = line.find('#'); hash != std::string_view::npos)
            line = line.substr(0, hash);
        line = trim(line);
        if (line.empty())
            continue;
        const auto eq = line.find('=');
        std::string error;
        if (eq == std::string_view::npos)
            error = "expected 'key = value', got '" + std::string(line) + "'";
        else if (parse_config_line(trim(line.substr(0, eq)), trim(line.substr(eq + 1)), names,
                                   result.layer, &error))
            continue;
        result.errors.push_back("line " + std::to_string(line_number) + ": " + error);
    }
    return result;
}

namespace {

std::optional<Mode> state_mode(const nlohmann::json& value)
{
    return value.is_string() ? parse_mode(value.get<std::string>()) : std::nullopt;
}

// Microseconds within the time quantum's range.
std::optional<Duration> state_time_quantum(const nlohmann::json& value)
{
    if (!value.is_number_unsigned())
        return std::nullopt;
    const Duration d = std::chrono::microseconds(
        std::min<uint64_t>(value.get<uint64_t>(), to_usec(kMaxTimeQuantum) + 1));
    return valid_time_quantum(d) ? std::optional(d) : std::nullopt;
}

}  // namespace

StateParse parse_state(std::string_view text)
{
    using nlohmann::json;
    StateParse result;
    const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    auto reject = [&result](std::string why) {
        result.layer = {};
        result.error = std::move(why);
        return result;
    };
    if (doc.is_discarded())
        return reject("not valid JSON");
    if (!doc.is_object())
        return reject("not a JSON object");
    const auto version = doc.find("version");
    if (version == doc.end() || !version->is_number_integer() || *version != kStateVersion)
        return reject("missing or unsupported \"version\" (expected " +
                      std::to_string(kStateVersion) + ")");
    for (const auto& [key, value] : doc.items()) {
        if (key == "version")
            continue;
        if (key == "anti_thrashing") {
            const auto m = state_mode(value);
            if (!m)
                return reject("\"anti_thrashing\" must be \"on\", \"off\" or \"auto\"");
            result.layer.mode = m;
        } else if (key == "time_quantum_us") {
            const auto d = state_time_quantum(value);
            if (!d)
                return reject(std::string("\"time_quantum_us\" must be microseconds, ") +
                              kTimeQuantumRange);
            result.layer.time_quantum = d;
        } else if (key == "gpu_anti_thrashing") {
            if (!value.is_object())
                return reject("\"gpu_anti_thrashing\" must map GPU UUIDs to modes");
            for (const auto& [uuid, mode] : value.items()) {
                const auto m = state_mode(mode);
                if (uuid.empty() || !m)
                    return reject(
                        "\"gpu_anti_thrashing\" must map GPU UUIDs to \"on\", \"off\" or "
                        "\"auto\"");
                result.layer.gpu_modes[uuid] = *m;
            }
        } else if (key == "gpu_time_quantum_us") {
            if (!value.is_object())
                return reject("\"gpu_time_quantum_us\" must map GPU UUIDs to microseconds");
            for (const auto& [uuid, usec] : value.items()) {
                const auto d = state_time_quantum(usec);
                if (uuid.empty() || !d)
                    return reject(
                        std::string(
                            "\"gpu_time_quantum_us\" must map GPU UUIDs to microseconds, ") +
                        kTimeQuantumRange);
                result.layer.gpu_time_quanta[uuid] = *d;
            }
        } else if (key == "capacities") {
            if (!value.is_object())
                return reject("\"capacities\" must map GPU UUIDs to bytes");
            for (const auto& [uuid, bytes] : value.items()) {
                if (uuid.empty() || !bytes.is_number_unsigned() ||
                    !valid_capacity(bytes.get<uint64_t>()))
                    return reject(
                        std::string("\"capacities\" must map GPU UUIDs to byte counts, ") +
                        kCapacityRange);
                result.layer.capacities[uuid] = bytes.get<uint64_t>();
            }
        } else {
            return reject("unknown key \"" + key + "\"");
        }
    }
    return result;
}

std::string serialize_state(const SettingsLayer& layer)
{
    nlohmann::json doc = {{"version", kStateVersion}};
    if (layer.mode)
        doc["anti_thrashing"] = proto::mode_name(*layer.mode);
    if (layer.time_quantum)
        doc["time_quantum_us"] = to_usec(*layer.time_quantum);
    if (!layer.capacities.empty())
        doc["capacities"] = layer.capacities;
    for (const auto& [uuid, mode] : layer.gpu_modes)
        doc["gpu_anti_thrashing"][uuid] = proto::mode_name(mode);
    for (const auto& [uuid, tq] : layer.gpu_time_quanta)
        doc["gpu_time_quantum_us"][uuid] = to_usec(tq);
    return doc.dump(2) + "\n";
}

}  // namespace nvshare::daemon
