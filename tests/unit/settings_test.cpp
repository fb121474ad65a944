#include "daemon/settings.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "daemon/options.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

TEST(Config, ParsesEveryKey)
{
    const auto r = parse_config(
        "# nvshare.conf\n"
        "\n"
        "time-quantum = 2min\n"
        "  anti-thrashing=on   # comment after a value\n"
        "grace = 500ms\r\n"
        "capacity = 16G\n"
        "capacity = GPU-aa = 8G\n"
        "log-waits-after = 250ms\n");
    EXPECT_TRUE(r.errors.empty()) << r.errors.front();
    EXPECT_EQ(r.layer.log_waits_after, Duration(250ms));
    EXPECT_EQ(r.layer.time_quantum, Duration(2min));
    EXPECT_EQ(r.layer.mode, Mode::On);
    EXPECT_EQ(r.layer.grace, Duration(500ms));
    EXPECT_EQ(r.layer.default_capacity, 16ull << 30);
    EXPECT_EQ(r.layer.capacities.at("GPU-aa"), 8ull << 30);
}

TEST(Config, GpusOwnTimeQuantumAndModeBesideTheHostWideOnes)
{
    const auto r = parse_config(
        "time-quantum = 2min\n"
        "time-quantum = GPU-aa = 500ms\n"
        "time-quantum = GPU-bb=1s\n"
        "time-quantum = GPU-bb=3s\n"  // repeated: the last one wins, per GPU
        "anti-thrashing = GPU-aa=off\n"
        "anti-thrashing = auto\n"
        "anti-thrashing = GPU-bb = on\n");
    EXPECT_TRUE(r.errors.empty()) << r.errors.front();
    EXPECT_EQ(r.layer.time_quantum, Duration(2min));
    EXPECT_EQ(r.layer.mode, Mode::Auto);
    const std::map<std::string, Duration> quanta = {{"GPU-aa", 500ms}, {"GPU-bb", 3s}};
    EXPECT_EQ(r.layer.gpu_time_quanta, quanta);
    const std::map<std::string, Mode> modes = {{"GPU-aa", Mode::Off}, {"GPU-bb", Mode::On}};
    EXPECT_EQ(r.layer.gpu_modes, modes);
}

TEST(Config, GpusOwnValuesHaveTheHostWideRanges)
{
    const auto r = parse_config(
        "time-quantum = GPU-aa=0\n"
        "time-quantum = GPU-aa=25h\n"
        "time-quantum = =1s\n"
        "anti-thrashing = GPU-aa=sometimes\n"
        "anti-thrashing = =on\n"
        "time-quantum = GPU-aa=1ms\n");
    ASSERT_EQ(r.errors.size(), 5u);
    EXPECT_NE(r.errors[0].find("line 1: invalid time quantum '0' (valid: 1ms to 24h"),
              std::string::npos)
        << r.errors[0];
    EXPECT_NE(r.errors[1].find("line 2: invalid time quantum '25h'"), std::string::npos);
    EXPECT_NE(r.errors[2].find("line 3: time quantum '=1s' names no GPU"), std::string::npos);
    EXPECT_NE(r.errors[3].find("line 4: invalid anti-thrashing mode 'sometimes'"),
              std::string::npos);
    EXPECT_NE(r.errors[4].find("line 5: anti-thrashing mode '=on' names no GPU"),
              std::string::npos);
    EXPECT_FALSE(r.layer.time_quantum);
    EXPECT_FALSE(r.layer.mode);
    EXPECT_TRUE(r.layer.gpu_modes.empty());
    EXPECT_EQ(r.layer.gpu_time_quanta.at("GPU-aa"), Duration(1ms));
}

TEST(Config, ReportsBadLinesAndKeepsTheRest)
{
    const auto r = parse_config(
        "time-quantum = 0\n"
        "time-quantum = 25h\n"
        "anti-thrashing = sometimes\n"
        "capacity = 0\n"
        "capacity = =4G\n"
        "colour = blue\n"
        "just words\n"
        "grace = 3s\n"
        "capacity = 1e19\n");
    ASSERT_EQ(r.errors.size(), 8u);
    EXPECT_NE(r.errors[0].find("line 1: invalid time quantum '0' (valid: 1ms to 24h"),
              std::string::npos)
        << r.errors[0];
    EXPECT_NE(r.errors[1].find("line 2:"), std::string::npos);
    EXPECT_NE(r.errors[2].find("(valid: on, off, auto)"), std::string::npos);
    EXPECT_NE(r.errors[3].find("(valid: [UUID=]SIZE, 1 byte to 8 TiB"), std::string::npos)
        << r.errors[3];
    // Past what any GPU has: refused, not taken as 2^63.
    EXPECT_NE(r.errors[7].find("line 9: invalid capacity '1e19'"), std::string::npos)
        << r.errors[7];
    EXPECT_FALSE(r.layer.default_capacity);
    EXPECT_NE(r.errors[4].find("names no GPU"), std::string::npos);
    EXPECT_NE(r.errors[5].find("unknown setting 'colour'"), std::string::npos);
    EXPECT_NE(r.errors[6].find("line 7: expected 'key = value'"), std::string::npos);
    EXPECT_FALSE(r.layer.time_quantum);
    EXPECT_FALSE(r.layer.mode);
    EXPECT_EQ(r.layer.grace, Duration(3s));
}

TEST(Config, PriorityRulesRepeatAndResolveNames)
{
    const NameLookup names{
        [](const std::string& n) {
            return n == "alice" ? std::optional<uint32_t>(1000) : std::nullopt;
        },
        [](const std::string& n) {
            return n == "gpu" ? std::optional<uint32_t>(44) : std::nullopt;
        },
    };
    const auto r = parse_config(
        "priority = user:alice=interactive\n"
        "priority = group:gpu = batch\n"
        "priority = unit:jupyter.service=interactive\n"
        "priority = default=batch\n"
        "priority = user:carol=batch\n"
        "priority = user:alice=urgent\n",
        names);
    ASSERT_EQ(r.errors.size(), 2u);
    EXPECT_NE(r.errors[0].find("line 5: unknown user 'carol'"), std::string::npos) << r.errors[0];
    EXPECT_NE(r.errors[1].find("line 6: invalid priority rule 'user:alice=urgent'"),
              std::string::npos)
        << r.errors[1];
    const std::vector<PriorityRule> expected{
        {RuleKind::User, 1000, "", Priority::Interactive},
        {RuleKind::Group, 44, "", Priority::Batch},
        {RuleKind::Unit, 0, "jupyter.service", Priority::Interactive},
        {RuleKind::Default, 0, "", Priority::Batch},
    };
    EXPECT_EQ(r.layer.priority_rules, expected);
    EXPECT_FALSE(r.layer.empty());
    // Without a lookup (the fuzzer's), names are unknown and ids still work.
    const auto plain = parse_config("priority = user:alice=batch\npriority = user:0=batch\n");
    ASSERT_EQ(plain.errors.size(), 1u);
    EXPECT_EQ(plain.layer.priority_rules.size(), 1u);
}

// A drop-in over the config file: what it sets wins, per-GPU values merge
// per GPU, priority rules add to the file's.
TEST(Config, ADropInLaysItsSettingsOverTheFile)
{
    SettingsLayer base = parse_config(
                             "time-quantum = 2min\n"
                             "anti-thrashing = on\n"
                             "capacity = GPU-a=8G\n"
                             "priority = default=batch\n")
                             .layer;
    const SettingsLayer top = parse_config(
                                  "time-quantum = 5min\n"
                                  "capacity = GPU-b=4G\n"
                                  "priority = user:0=interactive\n")
                                  .layer;
    merge_layer(base, top);
    EXPECT_EQ(base.time_quantum, std::chrono::minutes(5));
    EXPECT_EQ(base.mode, Mode::On);  // the drop-in says nothing of it
    EXPECT_EQ(base.capacities.at("GPU-a"), 8ull << 30);
    EXPECT_EQ(base.capacities.at("GPU-b"), 4ull << 30);
    ASSERT_EQ(base.priority_rules.size(), 2u);
    EXPECT_EQ(base.priority_rules[0].priority, Priority::Batch);
    EXPECT_EQ(base.priority_rules[1].priority, Priority::Interactive);
}

TEST(Config, PriorityRulesReachTheOptions)
{
    Options o = default_options(nullptr);
    EXPECT_TRUE(o.priority_rules.empty());
    apply_layer(parse_config("priority = default=batch\n").layer, o);
    ASSERT_EQ(o.priority_rules.size(), 1u);
    EXPECT_EQ(o.priority_rules[0].priority, Priority::Batch);
    apply_layer(SettingsLayer{}, o);  // later layers have none: the file's stay
    EXPECT_EQ(o.priority_rules.size(), 1u);
}

// Found by the config fuzzer: 18446744074 s does not fit in nanoseconds and
// wrapped to about 290 ms, which passed the range check.
TEST(Config, WaitLogThresholdFromZeroTo24Hours)
{
    const auto r = parse_config(
        "log-waits-after = 0\n"
        "log-waits-after = 25h\n"
        "log-waits-after = soon\n");
    ASSERT_EQ(r.errors.size(), 2u);
    EXPECT_NE(r.errors[0].find("line 2: invalid log-waits-after '25h' (valid: 0 to 24h"),
              std::string::npos)
        << r.errors[0];
    EXPECT_NE(r.errors[1].find("line 3: invalid log-waits-after 'soon'"), std::string::npos)
        << r.errors[1];
    EXPECT_EQ(r.layer.log_waits_after, Duration(0));  // 0: every wait is logged
}

TEST(Config, RejectsDurationsTooLongForNanoseconds)
{
    const auto r = parse_config("time-quantum = 18446744074\ngrace = 073709551615\n");
    ASSERT_EQ(r.errors.size(), 2u);
    EXPECT_NE(r.errors[0].find("line 1: invalid time quantum"), std::string::npos) << r.errors[0];
    EXPECT_NE(r.errors[1].find("line 2: invalid grace period"), std::string::npos) << r.errors[1];
    EXPECT_TRUE(r.layer.empty());
}

TEST(Config, EmptyOrBinaryInputNeverCrashes)
{
    EXPECT_TRUE(parse_config("").layer.empty());
    const std::string junk("\0\xff\x01=\n=\n\n#", 9);
    const auto r = parse_config(junk);
    EXPECT_TRUE(r.layer.empty());
    EXPECT_EQ(r.errors.size(), 2u);
}

TEST(State, RoundTrips)
{
    SettingsLayer layer;
    layer.mode = Mode::Off;
    layer.time_quantum = 45s;
    layer.capacities["GPU-aa"] = 123456789;
    layer.gpu_modes["GPU-aa"] = Mode::On;
    layer.gpu_modes["GPU-bb"] = Mode::Auto;
    layer.gpu_time_quanta["GPU-bb"] = 1500us;
    const std::string text = serialize_state(layer);
    const auto doc = nlohmann::json::parse(text);
    EXPECT_EQ(doc["gpu_anti_thrashing"], nlohmann::json({{"GPU-aa", "on"}, {"GPU-bb", "auto"}}));
    EXPECT_EQ(doc["gpu_time_quantum_us"], nlohmann::json({{"GPU-bb", 1500}}));
    const auto parsed = parse_state(text);
    EXPECT_FALSE(parsed.error) << *parsed.error;
    EXPECT_EQ(parsed.layer, layer);
    EXPECT_TRUE(parse_state(serialize_state({})).layer.empty());
}

TEST(State, RejectsCorruptFilesWhole)
{
    for (const char* bad : {
             "",
             "{",
             "[1, 2]",
             "{\"time_quantum_us\": 45000000}",  // no version
             "{\"version\": 2}",
             "{\"version\": 1, \"time_quantum_us\": 0}",
             "{\"version\": 1, \"time_quantum_us\": 86400000001}",
             "{\"version\": 1, \"time_quantum_us\": -5}",
             "{\"version\": 1, \"time_quantum_us\": \"30s\"}",
             "{\"version\": 1, \"anti_thrashing\": \"sometimes\"}",
             "{\"version\": 1, \"capacities\": {\"GPU-aa\": 0}}",
             "{\"version\": 1, \"capacities\": [1]}",
             "{\"version\": 1, \"capacities\": {\"\": 5}}",
             "{\"version\": 1, \"grace\": 5}",
             "{\"version\": 1, \"gpu_anti_thrashing\": {\"GPU-aa\": \"sometimes\"}}",
             "{\"version\": 1, \"gpu_anti_thrashing\": {\"\": \"on\"}}",
             "{\"version\": 1, \"gpu_anti_thrashing\": [\"on\"]}",
             "{\"version\": 1, \"gpu_time_quantum_us\": {\"GPU-aa\": 999}}",
             "{\"version\": 1, \"gpu_time_quantum_us\": {\"GPU-aa\": 86400000001}}",
             "{\"version\": 1, \"gpu_time_quantum_us\": {\"GPU-aa\": \"1s\"}}",
             "{\"version\": 1, \"gpu_time_quantum_us\": 1000}",
             "{\"version\": 1, \"time_quantum_us\": 45000000, \"anti_thrashing\": 3}",
         }) {
        const auto r = parse_state(bad);
        EXPECT_TRUE(r.error) << bad;
        EXPECT_TRUE(r.layer.empty()) << bad;  // nothing half-applied
    }
}

TEST(Layers, LaterLayersWinAndCapacitiesMerge)
{
    Options o;
    SettingsLayer config, cli, runtime;
    config.time_quantum = 2min;
    config.mode = Mode::On;
    config.capacities["GPU-aa"] = 1;
    config.capacities["GPU-bb"] = 2;
    cli.time_quantum = 10s;
    runtime.mode = Mode::Off;
    runtime.capacities["GPU-aa"] = 3;
    EXPECT_EQ(o.log_waits_after, Duration(1s));  // the built-in default
    config.log_waits_after = 5s;
    cli.log_waits_after = 0s;
    apply_layer(config, o);
    apply_layer(cli, o);
    apply_layer(runtime, o);
    EXPECT_EQ(o.log_waits_after, Duration(0s));
    EXPECT_EQ(o.scheduler.time_quantum, Duration(10s));
    EXPECT_EQ(o.scheduler.mode, Mode::Off);
    EXPECT_EQ(o.scheduler.grace, Duration(10s));  // the built-in default
    ASSERT_EQ(o.capacities.size(), 2u);
    EXPECT_EQ(configured_capacity(o, {"GPU-aa", "", 100}), 3u);
    EXPECT_EQ(configured_capacity(o, {"GPU-bb", "", 100}), 2u);
    EXPECT_EQ(configured_capacity(o, {"GPU-cc", "", 100}), 100u);  // physical
    o.default_capacity = 50;
    EXPECT_EQ(configured_capacity(o, {"GPU-cc", "", 100}), 50u);
}

TEST(Layers, GpusOwnModesAndQuantaMergePerGpu)
{
    Options o;
    SettingsLayer config, cli, runtime;
    config.gpu_modes = {{"GPU-aa", Mode::On}, {"GPU-bb", Mode::Off}};
    config.gpu_time_quanta = {{"GPU-aa", 1s}};
    cli.gpu_time_quanta = {{"GPU-aa", 2s}, {"GPU-cc", 3s}};
    runtime.gpu_modes = {{"GPU-bb", Mode::Auto}};
    runtime.mode = Mode::On;  // the host-wide one: no GPU's own changes with it
    apply_layer(config, o);
    apply_layer(cli, o);
    apply_layer(runtime, o);
    const std::map<std::string, Mode> modes = {{"GPU-aa", Mode::On}, {"GPU-bb", Mode::Auto}};
    EXPECT_EQ(o.gpu_modes, modes);
    const std::map<std::string, Duration> quanta = {{"GPU-aa", 2s}, {"GPU-cc", 3s}};
    EXPECT_EQ(o.gpu_time_quanta, quanta);
    EXPECT_EQ(o.scheduler.mode, Mode::On);
    EXPECT_EQ(o.scheduler.time_quantum, SchedulerSettings{}.time_quantum);
}

TEST(Layers, SplitGpuSetting)
{
    const GpuSetting host = split_gpu_setting(" 500ms ");
    EXPECT_FALSE(host.uuid);
    EXPECT_EQ(host.value, "500ms");
    const GpuSetting gpu = split_gpu_setting("GPU-aa = on");
    EXPECT_EQ(gpu.uuid, "GPU-aa");
    EXPECT_EQ(gpu.value, "on");
    EXPECT_EQ(split_gpu_setting("=on").uuid, "");
}

TEST(Layers, TimeQuantumBounds)
{
    EXPECT_FALSE(valid_time_quantum(0ms));
    EXPECT_FALSE(valid_time_quantum(999us));
    EXPECT_TRUE(valid_time_quantum(1ms));
    EXPECT_TRUE(valid_time_quantum(24h));
    EXPECT_FALSE(valid_time_quantum(24h + 1us));
}
