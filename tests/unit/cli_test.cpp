#include <gtest/gtest.h>

#include "cli/client_ref.h"
#include "cli/status_query.h"
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

// The daemon's document (daemon/status.cpp), with the user names nvsharectl adds.
static nlohmann::json two_gpu_status()
{
    return nlohmann::json::parse(R"({
      "version": "9.9", "mode": "auto", "time_quantum_us": 30000000, "grace_us": 10000000,
      "clients": [
          {"id": 3, "pid": 100, "uid": 0, "user": "root", "comm": "python", "state": "holding",
           "gpus": [0], "memory": 53687091200, "pinned_memory": 1048576, "held_us": 1500000,
           "waited_us": 0, "quantum_left_us": 28500000, "queue_position": 0, "wait_reason": "",
           "grants": 1, "drops": 0, "revocations": 0},
          {"id": 4, "pid": 2000, "uid": 1000, "user": "alice",
           "comm": "a-very-long-tra", "command": "python3 train.py --data /scratch/alice/set, v2",
           "cgroup": "jupyter-singleuser-alice.service", "state": "waiting", "gpus": [0],
           "memory": 53687091200, "pinned_memory": 0, "held_us": 0, "waited_us": 250000,
           "quantum_left_us": 0, "queue_position": 1, "wait_reason": "oversubscribed",
           "grants": 0, "drops": 2, "revocations": 1}],
      "gpus": [{
        "index": 0, "uuid": "GPU-1", "name": "H100", "physical_memory": 85899345920,
        "capacity": 85899345920, "requested_memory": 107374182400, "serializing": true,
        "holders": [3], "queue": [4]
      }, {
        "index": 1, "uuid": "GPU-2", "name": "H100", "physical_memory": 1024, "capacity": 1024,
        "requested_memory": 0, "serializing": false, "holders": [], "queue": []
      }]})");
}

TEST(StatusView, RendersEveryGpuAndClient)
{
    EXPECT_EQ(render_status(two_gpu_status()),
              "nvshared 9.9: anti-thrashing auto, time quantum 30s, grace 10s, 2 client(s)\n"
              "\n"
              "GPU 0  H100  GPU-1\n"
              "  memory:       100.0 GiB requested of 80.0 GiB capacity (physical 80.0 GiB), "
              "oversubscribed\n"
              "  serializing:  yes\n"
              "  holder:       3 (python)\n"
              "  waiting:      4 (a-very-long-tra)\n"
              "\n"
              "  ID  PID   USER   COMMAND                           UNIT                      "
              "STATE    MEMORY    HELD  WAITED  NOTE\n"
              "  3   100   root   python                            -                         "
              "holding  50.0 GiB  1.5s  0s      28.5s of quantum left\n"
              "  4   2000  alice  python3 train.py --data /scra...  jupyter-singleuser-al...  "
              "waiting  50.0 GiB  0s    250ms   #1 in queue, oversubscribed\n"
              "\n"
              "GPU 1  H100  GPU-2\n"
              "  memory:       0 B requested of 1.0 KiB capacity (physical 1.0 KiB)\n"
              "  serializing:  no\n"
              "  holder:       -\n"
              "  waiting:      -\n");
    // --full: the whole command line and unit, and every client's priority
    // class; the command name where nvshared read no command line.
    const std::string full = render_status(two_gpu_status(), true);
    EXPECT_NE(full.find("  python3 train.py --data /scratch/alice/set, v2  "
                        "jupyter-singleuser-alice.service  normal    waiting"),
              std::string::npos)
        << full;
    EXPECT_NE(full.find("  COMMAND                                         UNIT"
                        "                              PRIORITY  STATE"),
              std::string::npos)
        << full;
    EXPECT_NE(full.find("  python                                          -"
                        "                                 normal    holding"),
              std::string::npos)
        << full;
}

TEST(StatusView, SaysWhenACapacityIsAboveTheGpusMemory)
{
    auto status = two_gpu_status();
    status["gpus"][1]["capacity"] = 2048;
    EXPECT_NE(render_status(status).find(
                  "0 B requested of 2.0 KiB capacity (physical 1.0 KiB), capacity above the "
                  "GPU's memory\n"),
              std::string::npos);
}

// The rates the GPU's clients measured, the figures known; no line where
// none is, or where the document has none (an older nvshared).
TEST(StatusView, ShowsTheRatesMeasuredOnAGpu)
{
    auto status = two_gpu_status();
    status["gpus"][0]["rates"] = {{"engine_out", 55'200'000'000u},
                                  {"engine_in", 54'000'000'000u},
                                  {"evict", 0},
                                  {"prefetch", 0},
                                  {"host_pin", 25'030'000'000u}};
    status["gpus"][1]["rates"] = {{"engine_out", 0},
                                  {"engine_in", 0},
                                  {"evict", 0},
                                  {"prefetch", 48'000'000'000u},
                                  {"host_pin", 0}};
    const std::string text = render_status(status);
    EXPECT_NE(text.find("  waiting:      4 (a-very-long-tra)\n"
                        "  measured:     swappable memory 55.2 GB/s out, 54.0 GB/s in; host "
                        "memory made at 25.0 GB/s\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("  measured:     managed memory ? out, 48.0 GB/s in\n"), std::string::npos)
        << text;
    status["gpus"][1]["rates"]["prefetch"] = 0;
    EXPECT_EQ(render_status(status).find("managed memory"), std::string::npos);
    EXPECT_EQ(render_status(two_gpu_status()).find("measured:"), std::string::npos);
}

TEST(StatusView, ShowsPriorityClassesWhereOneIsNotNormal)
{
    auto status = two_gpu_status();
    status["clients"][0]["priority"] = "normal";
    status["clients"][1]["priority"] = "batch";
    const std::string text = render_status(status);
    EXPECT_NE(text.find("  UNIT                      PRIORITY  STATE"), std::string::npos) << text;
    EXPECT_NE(text.find("jupyter-singleuser-al...  batch     waiting"), std::string::npos) << text;
    EXPECT_NE(text.find("-                         normal    holding"), std::string::npos) << text;
    // GPU 1 has no clients: no table at all.
    EXPECT_EQ(text.find("PRIORITY", text.find("GPU 1")), std::string::npos) << text;
}

TEST(StatusQuery, CsvWithAndWithoutHeader)
{
    std::string error;
    auto q =
        parse_query("pid,user,command,memory,held_s,queue_position,wait_reason", "csv", &error);
    ASSERT_TRUE(q) << error;
    EXPECT_EQ(render_query(two_gpu_status(), *q),
              "pid,user,command,memory [MiB],held [s],queue_position,wait_reason\n"
              "100,root,python,51200,1.500,0,\n"
              "2000,alice,\"python3 train.py --data /scratch/alice/set, v2\",51200,0.000,1,"
              "oversubscribed\n");
    q = parse_query("pid,comm,cgroup", "csv,noheader", &error);
    ASSERT_TRUE(q) << error;
    EXPECT_EQ(render_query(two_gpu_status(), *q),
              "100,python,\n2000,a-very-long-tra,jupyter-singleuser-alice.service\n");
    q = parse_query("id,pinned_memory,quantum_left_s,drops,revocations", "csv,noheader", &error);
    ASSERT_TRUE(q) << error;
    EXPECT_EQ(render_query(two_gpu_status(), *q), "3,1,28.500,0,0\n4,0,0.000,2,1\n");
    auto with_class = two_gpu_status();
    with_class["clients"][1]["priority"] = "interactive";
    q = parse_query("id,priority", "csv", &error);
    ASSERT_TRUE(q) << error;
    EXPECT_EQ(render_query(with_class, *q), "id,priority\n3,normal\n4,interactive\n");
    // Every documented field is known.
    for (const auto& f : query_fields())
        EXPECT_TRUE(parse_query(f, "csv", &error)) << f;
}

TEST(StatusQuery, BadFieldsAndFormatsAreNamed)
{
    std::string error;
    EXPECT_FALSE(parse_query("pid,frob", "csv", &error));
    EXPECT_NE(error.find("unknown field 'frob'"), std::string::npos) << error;
    EXPECT_NE(error.find("wait_reason"), std::string::npos) << error;  // lists the valid ones
    EXPECT_FALSE(parse_query("pid,", "csv", &error));
    EXPECT_FALSE(parse_query("pid", "json", &error));
    EXPECT_NE(error.find("invalid format 'json' (valid: csv, csv,noheader)"), std::string::npos)
        << error;
}

TEST(StatusView, ShowsAGpusOwnSettingsWhereTheyDiffer)
{
    auto status = two_gpu_status();
    auto& g0 = status["gpus"][0];
    g0["mode"] = "on";
    g0["own_mode"] = true;
    g0["time_quantum_us"] = 500000;
    g0["own_time_quantum"] = true;
    auto& g1 = status["gpus"][1];
    g1["mode"] = "auto";  // its own, but the host-wide one too: not shown
    g1["own_mode"] = true;
    g1["time_quantum_us"] = 30000000;
    g1["own_time_quantum"] = false;
    const std::string text = render_status(status);
    EXPECT_NE(text.find("GPU 0  H100  GPU-1\n"
                        "  memory:        100.0 GiB requested of 80.0 GiB capacity (physical "
                        "80.0 GiB), oversubscribed\n"
                        "  own settings:  anti-thrashing on, time quantum 500ms\n"
                        "  serializing:   yes\n"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("own settings", text.find("GPU 1")), std::string::npos) << text;
}

TEST(StatusView, SaysWhenNoGpuIsKnown)
{
    const auto status = nlohmann::json::parse(R"({"version": "1", "mode": "on",
      "time_quantum_us": 500000, "grace_us": 1000, "client_count": 0, "clients": [], "gpus": []})");
    EXPECT_NE(render_status(status).find("No GPUs known"), std::string::npos);
    EXPECT_NE(render_status(status).find("time quantum 500ms, grace 1ms"), std::string::npos);
}
