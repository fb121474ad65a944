#include "metrics/render.h"

#include "metrics/gpu_labels.h"
#include "metrics/gpu_series.h"
#include "metrics/unit_series.h"

namespace nvshare::metrics {

namespace {

struct Metric {
    const char* name;
    const char* type;
    const char* help;
    const char* field;  // in each "usage" entry
    double divisor;     // field / divisor = the metric in its unit
};

constexpr Metric kMetrics[] = {
    {"nvshare_held_seconds_total", "counter", "Time the user's clients held the GPU lock.",
     "held_us", 1e6},
    {"nvshare_waited_seconds_total", "counter", "Time the user's clients waited for the GPU lock.",
     "waited_us", 1e6},
    {"nvshare_grants_total", "counter", "GPU lock grants to the user's clients.", "grants", 1},
    {"nvshare_drops_total", "counter",
     "Times the user's clients were asked to release the GPU for others.", "drops", 1},
    {"nvshare_revocations_total", "counter",
     "Times the GPU lock was taken away from the user's clients.", "revocations", 1},
    {"nvshare_swapped_in_bytes_total", "counter",
     "Bytes libnvshare.so moved to the GPU for the user's clients.", "bytes_swapped_in", 1},
    {"nvshare_swapped_out_bytes_total", "counter",
     "Bytes libnvshare.so moved off the GPU for the user's clients.", "bytes_swapped_out", 1},
    {"nvshare_swap_in_seconds_total", "counter", "Time spent moving data to the GPU.", "swap_in_us",
     1e6},
    {"nvshare_swap_out_seconds_total", "counter", "Time spent moving data off the GPU.",
     "swap_out_us", 1e6},
    {"nvshare_clients", "gauge", "The user's clients registered for the GPU now.", "clients", 1},
    {"nvshare_waiting", "gauge", "The user's clients waiting for the GPU now.", "waiting", 1},
};

}  // namespace

std::string render(const nlohmann::json& status, const UserName& user_name,
                   const std::string& hostname)
{
    std::string out =
        family_head("nvshare_up", "gauge", "Whether nvshared answered.") + "nvshare_up ";
    if (status.is_null())
        return out + "0\n";
    out += "1\n";
    out += family_head("nvshare_build_info", "gauge", "nvshared's version, as a label.") +
           "nvshare_build_info{version=\"" + escape_label(status.at("version").get<std::string>()) +
           "\"} 1\n";
    const GpuLabels labels(status.at("gpus"), hostname);
    for (const Metric& m : kMetrics) {
        out += family_head(m.name, m.type, m.help);
        for (const auto& u : status.at("usage"))
            out += std::string(m.name) + "{" + labels(u.at("gpu").get<uint64_t>()) + ",user=\"" +
                   escape_label(user_name(u.at("uid").get<uint32_t>())) + "\"} " +
                   number(static_cast<double>(u.at(m.field).get<uint64_t>()) / m.divisor) + "\n";
    }
    return out + render_gpu_series(status.at("gpus"), labels) +
           render_unit_series(status.at("clients"), labels);
}

std::string http_response(const std::string& head, const std::string& body)
{
    const auto line_end =
        head.find("\r\n") != std::string::npos ? head.find("\r\n") : head.find('\n');
    const std::string line = head.substr(0, line_end);
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
    const std::string method = line.substr(0, sp1);
    const std::string target =
        sp1 == std::string::npos
            ? ""
            : line.substr(sp1 + 1, sp2 == std::string::npos ? std::string::npos : sp2 - sp1 - 1);
    const auto reply = [](const char* status, const std::string& type, const std::string& text,
                          bool with_body) {
        return std::string("HTTP/1.0 ") + status + "\r\nContent-Type: " + type +
               "\r\nContent-Length: " + std::to_string(text.size()) +
               "\r\nConnection: close\r\n\r\n" + (with_body ? text : "");
    };
    if (method != "GET" && method != "HEAD")
        return reply("405 Method Not Allowed", "text/plain; charset=utf-8", "only GET and HEAD\n",
                     true);
    const std::string path = target.substr(0, target.find('?'));
    if (path != "/metrics" && path != "/")
        return reply("404 Not Found", "text/plain; charset=utf-8", "try /metrics\n", true);
    return reply("200 OK", "text/plain; version=0.0.4; charset=utf-8", body, method == "GET");
}

}  // namespace nvshare::metrics
