// The Prometheus text nvshare-metrics renders from nvshared's status
// (metrics/render.*). A scrape of the real endpoint is tests/system/metrics_test.py.
#include <gtest/gtest.h>

#include "metrics/render.h"

using nvshare::metrics::escape_label;
using nvshare::metrics::http_response;
using nvshare::metrics::render;

namespace {

const auto kNames = [](uint32_t uid) {
    return uid == 1000 ? std::string("alice") : std::to_string(uid);
};

nlohmann::json status()
{
    return nlohmann::json::parse(R"({
      "gpus": [{"index": 0, "uuid": "GPU-abc"}],
      "usage": [{"gpu": 0, "uid": 1000, "held_us": 12500000, "waited_us": 250000,
                 "grants": 3, "drops": 1, "revocations": 0, "bytes_swapped_in": 1024,
                 "bytes_swapped_out": 2048, "swap_in_us": 1000, "swap_out_us": 3000,
                 "clients": 1, "waiting": 0},
                {"gpu": 0, "uid": 1234, "held_us": 0, "waited_us": 0, "grants": 0, "drops": 0,
                 "revocations": 0, "bytes_swapped_in": 0, "bytes_swapped_out": 0,
                 "swap_in_us": 0, "swap_out_us": 0, "clients": 0, "waiting": 1}]})");
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

TEST(Metrics, SeriesPerUserAndGpuInTheirUnits)
{
    const std::string t = render(status(), kNames);
    EXPECT_TRUE(contains(t, "nvshare_up 1\n"));
    EXPECT_TRUE(contains(t, "# TYPE nvshare_held_seconds_total counter\n"));
    EXPECT_TRUE(contains(t, "nvshare_held_seconds_total{gpu=\"GPU-abc\",user=\"alice\"} 12.5\n"));
    EXPECT_TRUE(contains(t, "nvshare_waited_seconds_total{gpu=\"GPU-abc\",user=\"alice\"} 0.25\n"));
    EXPECT_TRUE(contains(t, "nvshare_grants_total{gpu=\"GPU-abc\",user=\"alice\"} 3\n"));
    EXPECT_TRUE(
        contains(t, "nvshare_swapped_out_bytes_total{gpu=\"GPU-abc\",user=\"alice\"} 2048\n"));
    EXPECT_TRUE(
        contains(t, "nvshare_swap_out_seconds_total{gpu=\"GPU-abc\",user=\"alice\"} 0.003\n"));
    EXPECT_TRUE(contains(t, "# TYPE nvshare_waiting gauge\n"));
    EXPECT_TRUE(contains(t, "nvshare_waiting{gpu=\"GPU-abc\",user=\"1234\"} 1\n"));
    EXPECT_EQ(t.back(), '\n');
}

TEST(Metrics, UnreachableDaemonIsUpZero)
{
    EXPECT_EQ(render(nullptr, kNames),
              "# HELP nvshare_up Whether nvshared answered.\n"
              "# TYPE nvshare_up gauge\nnvshare_up 0\n");
}

TEST(Metrics, BadDocumentThrows)
{
    EXPECT_ANY_THROW(render(nlohmann::json::parse(R"({"gpus": []})"), kNames));
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
