#include "cli/status_query.h"

#include <cstdio>
#include <functional>
#include <map>
#include <optional>

#include "cli/status_view.h"

namespace nvshare::cli {

namespace {

using nlohmann::json;

std::string seconds(const json& usec)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.3f", static_cast<double>(usec.get<uint64_t>()) / 1e6);
    return buf;
}

std::string mebibytes(const json& bytes)
{
    return std::to_string(bytes.get<uint64_t>() >> 20);
}

struct Field {
    const char* header;  // with its unit, as nvidia-smi writes them
    std::function<std::string(const json& client)> value;
};

// The columns, each read from one client of the status document.
const std::map<std::string, Field>& fields()
{
    static const std::map<std::string, Field> table = {
        {"id", {"id", [](const json& c) { return c["id"].dump(); }}},
        {"pid", {"pid", [](const json& c) { return c["pid"].dump(); }}},
        {"uid", {"uid", [](const json& c) { return c["uid"].dump(); }}},
        {"user", {"user", [](const json& c) { return c["user"].get<std::string>(); }}},
        {"command", {"command", [](const json& c) { return client_command(c); }}},
        {"comm", {"comm", [](const json& c) { return c["comm"].get<std::string>(); }}},
        {"cgroup", {"cgroup", [](const json& c) { return c.value("cgroup", std::string()); }}},
        {"priority",
         {"priority", [](const json& c) { return c.value("priority", std::string("normal")); }}},
        {"gpus",
         {"gpus",
          [](const json& c) {
              std::string out;
              for (const auto& g : c["gpus"])
                  out += (out.empty() ? "" : " ") + g.dump();
              return out;
          }}},
        {"state", {"state", [](const json& c) { return c["state"].get<std::string>(); }}},
        {"memory", {"memory [MiB]", [](const json& c) { return mebibytes(c["memory"]); }}},
        {"pinned_memory",
         {"pinned_memory [MiB]", [](const json& c) { return mebibytes(c["pinned_memory"]); }}},
        {"confirmed_pinned_memory",
         {"confirmed_pinned_memory [MiB]",
          [](const json& c) { return mebibytes(c["confirmed_pinned_memory"]); }}},
        {"confirmed_memory",
         {"confirmed_memory [MiB]",
          [](const json& c) { return mebibytes(c["confirmed_memory"]); }}},
        {"held_s", {"held [s]", [](const json& c) { return seconds(c["held_us"]); }}},
        {"waited_s", {"waited [s]", [](const json& c) { return seconds(c["waited_us"]); }}},
        {"quantum_left_s",
         {"quantum_left [s]", [](const json& c) { return seconds(c["quantum_left_us"]); }}},
        {"queue_position",
         {"queue_position", [](const json& c) { return c["queue_position"].dump(); }}},
        {"wait_reason",
         {"wait_reason", [](const json& c) { return c["wait_reason"].get<std::string>(); }}},
        {"grants", {"grants", [](const json& c) { return c["grants"].dump(); }}},
        {"drops", {"drops", [](const json& c) { return c["drops"].dump(); }}},
        {"revocations", {"revocations", [](const json& c) { return c["revocations"].dump(); }}},
    };
    return table;
}

std::vector<std::string> split(const std::string& text)
{
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        const size_t comma = text.find(',', start);
        out.push_back(text.substr(start, comma - start));
        if (comma == std::string::npos)
            return out;
        start = comma + 1;
    }
}

std::string csv_cell(const std::string& text)
{
    if (text.find_first_of(",\"\n\r") == std::string::npos)
        return text;
    std::string out = "\"";
    for (char ch : text)
        out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return out + "\"";
}

}  // namespace

const std::vector<std::string>& query_fields()
{
    static const std::vector<std::string> names = {"id",
                                                   "pid",
                                                   "uid",
                                                   "user",
                                                   "command",
                                                   "comm",
                                                   "cgroup",
                                                   "priority",
                                                   "gpus",
                                                   "state",
                                                   "memory",
                                                   "pinned_memory",
                                                   "confirmed_pinned_memory",
                                                   "confirmed_memory",
                                                   "held_s",
                                                   "waited_s",
                                                   "quantum_left_s",
                                                   "queue_position",
                                                   "wait_reason",
                                                   "grants",
                                                   "drops",
                                                   "revocations"};
    return names;
}

std::optional<QueryRequest> parse_query(const std::string& field_list, const std::string& format,
                                        std::string* error)
{
    QueryRequest r;
    if (format != "csv" && format != "csv,noheader") {
        *error = "invalid format '" + format + "' (valid: csv, csv,noheader)";
        return std::nullopt;
    }
    r.header = format == "csv";
    for (const auto& f : split(field_list)) {
        if (fields().count(f) == 0) {
            std::string known;
            for (const auto& k : query_fields())
                known += (known.empty() ? "" : ",") + k;
            *error = "unknown field '" + f + "' in --query (valid: " + known + ")";
            return std::nullopt;
        }
        r.fields.push_back(f);
    }
    return r;
}

std::string render_query(const json& status, const QueryRequest& request)
{
    std::string out;
    const auto line = [&out, &request](const std::function<std::string(const Field&)>& cell) {
        for (size_t i = 0; i < request.fields.size(); ++i)
            out += (i ? "," : "") + csv_cell(cell(fields().at(request.fields[i])));
        out += "\n";
    };
    if (request.header)
        line([](const Field& f) { return std::string(f.header); });
    for (const auto& c : status["clients"])
        line([&c](const Field& f) { return f.value(c); });
    return out;
}

}  // namespace nvshare::cli
