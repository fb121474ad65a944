#include <gtest/gtest.h>

#include "cli/client_ref.h"
#include "cli/status_view.h"

using namespace nvshare::cli;

TEST(ClientRef, IdsAndPids)
{
    EXPECT_EQ(parse_client_ref("12")->value, 12u);
    EXPECT_FALSE(parse_client_ref("12")->by_pid);
    EXPECT_TRUE(parse_client_ref("pid:345")->by_pid);
    EXPECT_EQ(parse_client_ref("pid:345")->value, 345u);
    for (const char* bad :
         {"", "pid:", "pid:0", "pid:-1", "pid:99999999999", "x", "12x", "-3", " 4", "PID:4"})
        EXPECT_FALSE(parse_client_ref(bad)) << bad;
}

TEST(StatusView, AlignsColumns)
{
    EXPECT_EQ(format_table({{"a", "bb", "c"}, {"ddd", "e", "f"}}, "  "),
              "  a    bb  c\n"
              "  ddd  e   f\n");
}

TEST(StatusView, RendersEveryGpuAndClient)
{
    const auto status = nlohmann::json::parse(R"({
      "version": "9.9", "mode": "auto", "time_quantum_us": 30000000, "grace_us": 10000000,
      "client_count": 2,
      "clients": [{"id": 3}, {"id": 4}],
      "gpus": [{
        "index": 0, "uuid": "GPU-1", "name": "H100", "physical_memory": 85899345920,
        "capacity": 85899345920, "requested_memory": 107374182400, "serializing": true,
        "holders": [3], "queue": [4],
        "clients": [
          {"id": 3, "pid": 100, "uid": 0, "user": "root", "comm": "python", "state": "holding",
           "memory": 53687091200, "held_us": 1500000, "waited_us": 0},
          {"id": 4, "pid": 2000, "uid": 1000, "user": "alice", "comm": "train", "state": "waiting",
           "memory": 53687091200, "held_us": 0, "waited_us": 250000}]
      }, {
        "index": 1, "uuid": "GPU-2", "name": "H100", "physical_memory": 1024, "capacity": 1024,
        "requested_memory": 0, "serializing": false, "holders": [], "queue": [], "clients": []
      }]})");
    EXPECT_EQ(render_status(status),
              "nvshared 9.9: anti-thrashing auto, time quantum 30s, grace 10s, 2 client(s)\n"
              "\n"
              "GPU 0  H100  GPU-1\n"
              "  memory:       100.0 GiB requested of 80.0 GiB capacity (physical 80.0 GiB), "
              "oversubscribed\n"
              "  serializing:  yes\n"
              "  holder:       3 (python)\n"
              "  waiting:      4 (train)\n"
              "\n"
              "  ID  PID   USER   COMMAND  STATE    MEMORY    HELD  WAITED\n"
              "  3   100   root   python   holding  50.0 GiB  1.5s  0s\n"
              "  4   2000  alice  train    waiting  50.0 GiB  0s    250ms\n"
              "\n"
              "GPU 1  H100  GPU-2\n"
              "  memory:       0 B requested of 1.0 KiB capacity (physical 1.0 KiB)\n"
              "  serializing:  no\n"
              "  holder:       -\n"
              "  waiting:      -\n");
}

TEST(StatusView, SaysWhenNoGpuIsKnown)
{
    const auto status = nlohmann::json::parse(R"({"version": "1", "mode": "on",
      "time_quantum_us": 500000, "grace_us": 1000, "client_count": 0, "clients": [], "gpus": []})");
    EXPECT_NE(render_status(status).find("No GPUs known"), std::string::npos);
    EXPECT_NE(render_status(status).find("time quantum 500ms, grace 1ms"), std::string::npos);
}
