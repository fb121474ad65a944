#include "cli/status_view.h"

#include <algorithm>
#include <cstdio>

#include "common/units.h"
#include "common/user_name.h"

namespace nvshare::cli {

namespace {

using nlohmann::json;

std::string duration_text(const json& usec)
{
    const auto us = usec.get<int64_t>();
    // Whole milliseconds are enough for people, and keep the columns short.
    return format_duration(std::chrono::microseconds(us < 1000 ? us : us / 1000 * 1000));
}

std::string ids_text(const json& ids, const json& clients)
{
    if (ids.empty())
        return "-";
    std::string out;
    for (const auto& id : ids) {
        if (!out.empty())
            out += ", ";
        out += std::to_string(id.get<uint64_t>());
        for (const auto& c : clients)
            if (c["id"] == id)
                out += " (" + c["comm"].get<std::string>() + ")";
    }
    return out;
}

// Why a client waits, or what is left of its hold.
std::string note_text(const json& c)
{
    const std::string state = c["state"].get<std::string>();
    if (state == "holding")
        return duration_text(c["quantum_left_us"]) + " of quantum left";
    if (state == "waiting")
        return "#" + std::to_string(c["queue_position"].get<uint64_t>()) + " in queue, " +
               c["wait_reason"].get<std::string>();
    return "";
}

// Cut to a column's width unless the whole was asked for (--full).
std::string cut_text(const std::string& text, size_t width, bool full)
{
    if (full || text.size() <= width)
        return text;
    size_t n = width - 3;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80)
        --n;  // not inside a UTF-8 sequence
    return text.substr(0, n) + "...";
}

// A command line says which notebook or script it is within its first
// words; a unit or container name within its first 24 bytes.
constexpr size_t kCommandWidth = 32;
constexpr size_t kUnitWidth = 24;

std::string unit_text(const json& c, bool full)
{
    const std::string cgroup = c.value("cgroup", std::string());
    return cgroup.empty() ? "-" : cut_text(cgroup, kUnitWidth, full);
}

// A daemon older than priority classes sends none: all were alike, normal.
std::string priority_text(const json& c)
{
    return c.value("priority", std::string("normal"));
}

}  // namespace

std::string format_table(const std::vector<std::vector<std::string>>& rows,
                         const std::string& indent)
{
    std::vector<size_t> widths;
    for (const auto& row : rows) {
        widths.resize(std::max(widths.size(), row.size()));
        for (size_t i = 0; i < row.size(); ++i)
            widths[i] = std::max(widths[i], row[i].size());
    }
    std::string out;
    for (const auto& row : rows) {
        std::string line = indent;
        for (size_t i = 0; i < row.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size())
                line += std::string(widths[i] - row[i].size() + 2, ' ');
        }
        out += line + "\n";
    }
    return out;
}

namespace {

// What the GPU's clients measured memory to move at (status "rates"), the
// figures known: "" where none is (or an older daemon says nothing).
std::string rates_text(const json& g)
{
    if (!g.contains("rates"))
        return "";
    const json& r = g["rates"];
    const auto rate = [&r](const char* name) {
        const uint64_t v = r.value(name, uint64_t{0});
        if (v == 0)
            return std::string("?");
        char text[32];
        snprintf(text, sizeof text, "%.1f GB/s", static_cast<double>(v) / 1e9);
        return std::string(text);
    };
    const auto pair = [&](const char* what, const char* out, const char* in) {
        if (r.value(out, uint64_t{0}) == 0 && r.value(in, uint64_t{0}) == 0)
            return std::string();
        return std::string(what) + " " + rate(out) + " out, " + rate(in) + " in";
    };
    std::vector<std::string> parts;
    for (std::string part :
         {pair("swappable memory", "engine_out", "engine_in"),
          pair("managed memory", "evict", "prefetch"),
          r.value("host_pin", uint64_t{0}) == 0 ? std::string()
                                                : "host memory made at " + rate("host_pin")})
        if (!part.empty())
            parts.push_back(std::move(part));
    std::string text;
    for (const std::string& p : parts)
        text += (text.empty() ? "" : "; ") + p;
    return text;
}

// The settings of GPU `g` that are its own and differ from the host-wide
// ones of `s`, e.g. "anti-thrashing on, time quantum 500ms"; "" if none.
// A document without them (an older nvshared) has none.
std::string own_settings_text(const json& s, const json& g)
{
    std::string out;
    if (g.value("own_mode", false) && g["mode"] != s["mode"])
        out = "anti-thrashing " + g["mode"].get<std::string>();
    if (g.value("own_time_quantum", false) && g["time_quantum_us"] != s["time_quantum_us"])
        out += (out.empty() ? "" : ", ") + std::string("time quantum ") +
               duration_text(g["time_quantum_us"]);
    return out;
}

}  // namespace

std::string client_command(const json& client)
{
    const std::string command = client.value("command", std::string());
    return command.empty() ? client["comm"].get<std::string>() : command;
}

std::string render_status(const json& s, bool full)
{
    const auto& clients = s["clients"];
    std::string out = "nvshared " + s["version"].get<std::string>() + ": anti-thrashing " +
                      s["mode"].get<std::string>() + ", time quantum " +
                      duration_text(s["time_quantum_us"]) + ", grace " +
                      duration_text(s["grace_us"]) + ", " + std::to_string(clients.size()) +
                      " client(s)\n";
    if (s["gpus"].empty())
        out += "\nNo GPUs known: the driver lists none, and no client has registered one.\n";
    for (const auto& g : s["gpus"]) {
        out += "\nGPU " + std::to_string(g["index"].get<uint32_t>()) + "  " +
               g["name"].get<std::string>() + "  " + g["uuid"].get<std::string>() + "\n";
        const auto requested = g["requested_memory"].get<uint64_t>();
        const auto capacity = g["capacity"].get<uint64_t>();
        std::vector<std::vector<std::string>> summary = {
            {"memory:", format_size(requested) + " requested of " + format_size(capacity) +
                            " capacity (physical " +
                            format_size(g["physical_memory"].get<uint64_t>()) + ")" +
                            (requested > capacity ? ", oversubscribed" : "") +
                            (capacity > g["physical_memory"].get<uint64_t>() &&
                                     g["physical_memory"].get<uint64_t>() != 0
                                 ? ", capacity above the GPU's memory"
                                 : "")},
            {"serializing:", g["serializing"].get<bool>() ? "yes" : "no"},
            {"holder:", ids_text(g["holders"], clients)},
            {"waiting:", ids_text(g["queue"], clients)},
        };
        if (const std::string own = own_settings_text(s, g); !own.empty())
            summary.insert(summary.begin() + 1, {"own settings:", own});
        if (const std::string rates = rates_text(g); !rates.empty())
            summary.push_back({"measured:", rates});
        out += format_table(summary, "  ");
        std::vector<json> listed;
        for (const auto& c : clients) {
            const auto& gpus = c["gpus"];
            if (std::find(gpus.begin(), gpus.end(), g["index"]) != gpus.end())
                listed.push_back(c);
        }
        // The PRIORITY column only where it says something, unless --full.
        const bool priorities =
            full || std::any_of(listed.begin(), listed.end(),
                                [](const json& c) { return priority_text(c) != "normal"; });
        std::vector<std::vector<std::string>> rows = {
            {"ID", "PID", "USER", "COMMAND", "UNIT", "STATE", "MEMORY", "HELD", "WAITED", "NOTE"}};
        if (priorities)
            rows[0].insert(rows[0].begin() + 5, "PRIORITY");
        for (const auto& c : listed) {
            std::vector<std::string> row = {std::to_string(c["id"].get<uint64_t>()),
                                            std::to_string(c["pid"].get<int32_t>()),
                                            c["user"].get<std::string>(),
                                            cut_text(client_command(c), kCommandWidth, full),
                                            unit_text(c, full),
                                            c["state"].get<std::string>(),
                                            format_size(c["memory"].get<uint64_t>()),
                                            duration_text(c["held_us"]),
                                            duration_text(c["waited_us"]),
                                            note_text(c)};
            if (priorities)
                row.insert(row.begin() + 5, priority_text(c));
            rows.push_back(std::move(row));
        }
        if (rows.size() > 1)
            out += "\n" + format_table(rows, "  ");
    }
    return out;
}

void add_user_names(json& status)
{
    for (auto& c : status["clients"]) {
        c["user"] = user_name(c["uid"].get<uint32_t>());
    }
}

}  // namespace nvshare::cli
