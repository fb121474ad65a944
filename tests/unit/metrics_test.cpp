// The Prometheus text nvshare-metrics renders from nvshared's status
// (metrics/render.*). A scrape of the real endpoint is tests/system/metrics_test.py.
#include <gtest/gtest.h>

#include "metrics/render.h"
#include "metrics/unit_series.h"

using nvshare::metrics::escape_label;
using nvshare::metrics::http_response;
using nvshare::metrics::kMaxUnitsPerGpu;
using nvshare::metrics::kOtherUnits;
using nvshare::metrics::render;

namespace {

const auto kNames = [](uint32_t uid) {
    return uid == 1000 ? std::string("alice") : std::to_string(uid);
};

// The labels of GPU 0 in status(), as DCGM exporter writes them.
const std::string kGpu0 =
    "gpu=\"0\",UUID=\"GPU-abc\",modelName=\"NVIDIA H200\",Hostname=\"node-1\"";

nlohmann::json client(uint64_t id, const std::string& cgroup, const std::string& state)
{
    return {{"id", id}, {"cgroup", cgroup}, {"state", state}, {"gpus", {0}}};
}

nlohmann::json status()
{
    auto s = nlohmann::json::parse(R"({
      "version": "1.2.3",
      "gpus": [{"index": 0, "uuid": "GPU-abc", "name": "NVIDIA H200",
                "physical_memory": 150000000000, "capacity": 140000000000,
                "requested_memory": 2048, "holders": [1], "queue": [2, 3],
                "serializing": true, "oversubscribed": false, "mode": "auto",
                "time_quantum_us": 30000000}],
      "usage": [{"gpu": 0, "uid": 1000, "held_us": 12500000, "waited_us": 250000,
                 "grants": 3, "drops": 1, "revocations": 0, "bytes_swapped_in": 1024,
                 "bytes_swapped_out": 2048, "swap_in_us": 1000, "swap_out_us": 3000,
                 "clients": 1, "waiting": 0},
                {"gpu": 0, "uid": 1234, "held_us": 0, "waited_us": 0, "grants": 0, "drops": 0,
                 "revocations": 0, "bytes_swapped_in": 0, "bytes_swapped_out": 0,
                 "swap_in_us": 0, "swap_out_us": 0, "clients": 0, "waiting": 1}]})");
    s["clients"] = {client(1, "libpod-1.scope", "holding"), client(2, "libpod-1.scope", "waiting"),
                    client(3, "", "waiting")};
    return s;
}

std::string render_status(const nlohmann::json& s)
{
    return render(s, kNames, "node-1");
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

TEST(Metrics, SeriesPerUserAndGpuInTheirUnits)
{
    const std::string t = render_status(status());
    EXPECT_TRUE(contains(t, "nvshare_up 1\n"));
    EXPECT_TRUE(contains(t, "# TYPE nvshare_held_seconds_total counter\n"));
    EXPECT_TRUE(contains(t, "nvshare_held_seconds_total{" + kGpu0 + ",user=\"alice\"} 12.5\n"));
    EXPECT_TRUE(contains(t, "nvshare_waited_seconds_total{" + kGpu0 + ",user=\"alice\"} 0.25\n"));
    EXPECT_TRUE(contains(t, "nvshare_grants_total{" + kGpu0 + ",user=\"alice\"} 3\n"));
    EXPECT_TRUE(
        contains(t, "nvshare_swapped_out_bytes_total{" + kGpu0 + ",user=\"alice\"} 2048\n"));
    EXPECT_TRUE(
        contains(t, "nvshare_swap_out_seconds_total{" + kGpu0 + ",user=\"alice\"} 0.003\n"));
    EXPECT_TRUE(contains(t, "# TYPE nvshare_waiting gauge\n"));
    EXPECT_TRUE(contains(t, "nvshare_waiting{" + kGpu0 + ",user=\"1234\"} 1\n"));
    EXPECT_EQ(t.back(), '\n');
}

TEST(Metrics, GpuLabelsAreDcgmExportersEscaped)
{
    auto s = status();
    s["gpus"][0]["name"] = "Model \"X\"";
    const std::string t = render(s, kNames, "host\\1");
    EXPECT_TRUE(contains(t,
                         "nvshare_grants_total{gpu=\"0\",UUID=\"GPU-abc\",modelName=\"Model "
                         "\\\"X\\\"\",Hostname=\"host\\\\1\",user=\"alice\"} 3\n"));
}

TEST(Metrics, UsageOfAnUnlistedGpuKeepsItsIndex)
{
    auto s = status();
    s["usage"][0]["gpu"] = 7;
    EXPECT_TRUE(contains(render_status(s),
                         "nvshare_grants_total{gpu=\"7\",UUID=\"\",modelName=\"\",Hostname=\"node-"
                         "1\",user=\"alice\"} 3\n"));
}

TEST(Metrics, BuildInfo)
{
    const std::string t = render_status(status());
    EXPECT_TRUE(contains(t, "# TYPE nvshare_build_info gauge\n"));
    EXPECT_TRUE(contains(t, "nvshare_build_info{version=\"1.2.3\"} 1\n"));
}

TEST(Metrics, GpuGauges)
{
    const std::string t = render_status(status());
    EXPECT_TRUE(contains(t, "# TYPE nvshare_gpu_capacity_bytes gauge\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_capacity_bytes{" + kGpu0 + "} 140000000000\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_physical_memory_bytes{" + kGpu0 + "} 150000000000\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_requested_memory_bytes{" + kGpu0 + "} 2048\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_holders{" + kGpu0 + "} 1\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_queue_length{" + kGpu0 + "} 2\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_serializing{" + kGpu0 + "} 1\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_oversubscribed{" + kGpu0 + "} 0\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_time_quantum_seconds{" + kGpu0 + "} 30\n"));
}

TEST(Metrics, GpuModeIsAnEnum)
{
    const std::string t = render_status(status());
    EXPECT_TRUE(contains(t, "# TYPE nvshare_gpu_mode gauge\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_mode{" + kGpu0 + ",mode=\"auto\"} 1\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_mode{" + kGpu0 + ",mode=\"on\"} 0\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_mode{" + kGpu0 + ",mode=\"off\"} 0\n"));
}

// The rates the GPU's clients measured, one series a kind; none from an
// older nvshared, whose status has no "rates".
TEST(Metrics, MeasuredRatesByKind)
{
    auto s = status();
    EXPECT_FALSE(contains(render_status(s), "nvshare_gpu_measured_rate_bytes_per_second{"));
    s["gpus"][0]["rates"] = {{"engine_out", 55000000000u},
                             {"engine_in", 54000000000u},
                             {"evict", 0},
                             {"prefetch", 0},
                             {"host_pin", 25000000000u}};
    const std::string t = render_status(s);
    EXPECT_TRUE(contains(t, "# TYPE nvshare_gpu_measured_rate_bytes_per_second gauge\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_measured_rate_bytes_per_second{" + kGpu0 +
                                ",kind=\"engine_out\"} 55000000000\n"))
        << t;
    EXPECT_TRUE(contains(
        t, "nvshare_gpu_measured_rate_bytes_per_second{" + kGpu0 + ",kind=\"evict\"} 0\n"));
    EXPECT_TRUE(contains(t, "nvshare_gpu_measured_rate_bytes_per_second{" + kGpu0 +
                                ",kind=\"host_pin\"} 25000000000\n"));
}

TEST(Metrics, ClientsPerUnit)
{
    const std::string t = render_status(status());
    EXPECT_TRUE(contains(t, "# TYPE nvshare_unit_clients gauge\n"));
    EXPECT_TRUE(contains(t, "nvshare_unit_clients{" + kGpu0 + ",unit=\"libpod-1.scope\"} 2\n"));
    EXPECT_TRUE(contains(t, "nvshare_unit_waiting{" + kGpu0 + ",unit=\"libpod-1.scope\"} 1\n"));
    EXPECT_TRUE(contains(t, "nvshare_unit_clients{" + kGpu0 + ",unit=\"\"} 1\n"));
    EXPECT_TRUE(contains(t, "nvshare_unit_waiting{" + kGpu0 + ",unit=\"\"} 1\n"));
}

TEST(Metrics, UnitsPerGpuAreBounded)
{
    auto s = status();
    s["clients"] = nlohmann::json::array();
    s["clients"].push_back(client(0, "big", "waiting"));
    s["clients"].push_back(client(1, "big", "holding"));
    for (uint64_t i = 0; i < kMaxUnitsPerGpu + 5; ++i)
        s["clients"].push_back(client(i + 2, "u" + std::to_string(100 + i), "waiting"));
    const std::string t = render_status(s);
    size_t series = 0;
    for (size_t at = t.find("\nnvshare_unit_clients{"); at != std::string::npos;
         at = t.find("\nnvshare_unit_clients{", at + 1))
        ++series;
    EXPECT_EQ(series, kMaxUnitsPerGpu + 1);
    EXPECT_TRUE(contains(t, "nvshare_unit_clients{" + kGpu0 + ",unit=\"big\"} 2\n"));
    // The 55 one-client units: the first 49 by name shown, 6 added up.
    EXPECT_TRUE(contains(t, "nvshare_unit_clients{" + kGpu0 + ",unit=\"u148\"} 1\n"));
    EXPECT_FALSE(contains(t, "unit=\"u149\""));
    EXPECT_TRUE(contains(
        t, "nvshare_unit_clients{" + kGpu0 + ",unit=\"" + std::string(kOtherUnits) + "\"} 6\n"));
    EXPECT_TRUE(contains(
        t, "nvshare_unit_waiting{" + kGpu0 + ",unit=\"" + std::string(kOtherUnits) + "\"} 6\n"));
}

TEST(Metrics, UnreachableDaemonIsUpZero)
{
    EXPECT_EQ(render(nullptr, kNames, "node-1"),
              "# HELP nvshare_up Whether nvshared answered.\n"
              "# TYPE nvshare_up gauge\nnvshare_up 0\n");
}

TEST(Metrics, BadDocumentThrows)
{
    EXPECT_ANY_THROW(render(nlohmann::json::parse(R"({"gpus": []})"), kNames, "node-1"));
    auto s = status();
    s["gpus"][0]["queue"] = 2;
    EXPECT_ANY_THROW(render_status(s));
}

TEST(Metrics, LabelsAreEscaped)
{
    EXPECT_EQ(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Metrics, Http)
{
    const std::string ok = http_response("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "body\n");
    EXPECT_EQ(ok.rfind("HTTP/1.0 200 OK\r\n", 0), 0u);
    EXPECT_TRUE(contains(ok, "Content-Type: text/plain; version=0.0.4"));
    EXPECT_TRUE(contains(ok, "Content-Length: 5\r\n"));
    EXPECT_TRUE(contains(ok, "\r\n\r\nbody\n"));
    const std::string head = http_response("HEAD / HTTP/1.0\r\n\r\n", "body\n");
    EXPECT_TRUE(contains(head, "200 OK") && !contains(head, "body"));
    EXPECT_TRUE(contains(http_response("GET /other HTTP/1.0\r\n\r\n", ""), "404"));
    EXPECT_TRUE(contains(http_response("POST /metrics HTTP/1.0\r\n\r\n", ""), "405"));
    EXPECT_TRUE(contains(http_response("", ""), "405"));
}

}  // namespace
