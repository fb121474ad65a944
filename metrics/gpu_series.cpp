#include "metrics/gpu_series.h"

#include "metrics/exposition.h"

namespace nvshare::metrics {

namespace {

// How a field of a "gpus" entry becomes the gauge's value.
enum class Reading { kBytes, kMicroseconds, kCount, kFlag };

struct Gauge {
    const char* name;
    const char* help;
    const char* field;
    Reading reading;
};

constexpr Gauge kGauges[] = {
    {"nvshare_gpu_physical_memory_bytes",
     "The GPU's memory as its clients reported it (0 until one has).", "physical_memory",
     Reading::kBytes},
    {"nvshare_gpu_capacity_bytes",
     "The memory the GPU's clients may use together before they take turns (mode auto).",
     "capacity", Reading::kBytes},
    {"nvshare_gpu_requested_memory_bytes", "The memory the GPU's clients reported using.",
     "requested_memory", Reading::kBytes},
    {"nvshare_gpu_holders", "Clients holding the GPU lock now.", "holders", Reading::kCount},
    {"nvshare_gpu_queue_length", "Clients waiting for the GPU lock now.", "queue", Reading::kCount},
    {"nvshare_gpu_serializing", "1 while the GPU's clients take turns, else 0.", "serializing",
     Reading::kFlag},
    {"nvshare_gpu_oversubscribed",
     "1 while the GPU's clients reported more memory than its capacity, else 0.", "oversubscribed",
     Reading::kFlag},
    {"nvshare_gpu_time_quantum_seconds",
     "How long a holder may keep the GPU lock once others wait.", "time_quantum_us",
     Reading::kMicroseconds},
};

constexpr const char* kModes[] = {"on", "off", "auto"};

// The figures of a GPU's "rates", as the kind label names them.
constexpr const char* kRates[] = {"engine_out", "engine_in", "evict", "prefetch", "host_pin"};

double value(const nlohmann::json& field, Reading reading)
{
    switch (reading) {
        case Reading::kBytes:
            return static_cast<double>(field.get<uint64_t>());
        case Reading::kMicroseconds:
            return static_cast<double>(field.get<uint64_t>()) / 1e6;
        case Reading::kCount:
            return static_cast<double>(field.get_ref<const nlohmann::json::array_t&>().size());
        case Reading::kFlag:
            return field.get<bool>() ? 1 : 0;
    }
    return 0;
}

}  // namespace

std::string render_gpu_series(const nlohmann::json& gpus, const GpuLabels& labels)
{
    std::string out;
    for (const Gauge& g : kGauges) {
        out += family_head(g.name, "gauge", g.help);
        for (const auto& gpu : gpus)
            out += std::string(g.name) + "{" + labels(gpu.at("index").get<uint64_t>()) + "} " +
                   number(value(gpu.at(g.field), g.reading)) + "\n";
    }
    out += family_head("nvshare_gpu_mode", "gauge",
                       "The GPU's anti-thrashing mode: 1 for the mode in force, 0 for the others.");
    for (const auto& gpu : gpus) {
        const auto mode = gpu.at("mode").get<std::string>();
        for (const char* m : kModes)
            out += "nvshare_gpu_mode{" + labels(gpu.at("index").get<uint64_t>()) + ",mode=\"" + m +
                   "\"} " + (mode == m ? "1" : "0") + "\n";
    }
    out += family_head("nvshare_gpu_measured_rate_bytes_per_second", "gauge",
                       "The rate at which memory moved on the GPU as its clients last measured "
                       "it, by kind (0: not measured).");
    for (const auto& gpu : gpus) {
        if (!gpu.contains("rates"))
            continue;  // an older nvshared
        for (const char* kind : kRates)
            out += "nvshare_gpu_measured_rate_bytes_per_second{" +
                   labels(gpu.at("index").get<uint64_t>()) + ",kind=\"" + kind + "\"} " +
                   number(static_cast<double>(gpu.at("rates").at(kind).get<uint64_t>())) + "\n";
    }
    return out;
}

}  // namespace nvshare::metrics
