#include "cli/cdi_spec.h"

#include <gtest/gtest.h>

namespace cdi = nvshare::cli::cdi;
using nlohmann::json;

namespace {

const cdi::Paths kPaths{"/run/nvshare", "/run/nvshare", "/usr/lib/x86_64-linux-gnu/libnvshare.so",
                        "/var/lib/nvshare/container-ld.so.preload"};

}  // namespace

TEST(CdiSpec, AllThenIndicesThenUuidsEachWithTheMounts)
{
    const json spec = cdi::make_spec({{0, "GPU-aa"}, {1, "GPU-bb"}}, kPaths);
    EXPECT_EQ(spec["kind"], "nvshare.com/gpu");
    EXPECT_EQ(spec["cdiVersion"], "0.5.0");
    std::string error;
    EXPECT_EQ(
        cdi::device_names(spec, &error),
        (std::vector<std::string>{"nvshare.com/gpu=all", "nvshare.com/gpu=0", "nvshare.com/gpu=1",
                                  "nvshare.com/gpu=GPU-aa", "nvshare.com/gpu=GPU-bb"}));
    for (const auto& d : spec["devices"]) {
        const auto& mounts = d["containerEdits"]["mounts"];
        ASSERT_EQ(mounts.size(), 3u);
        EXPECT_EQ(mounts[2]["containerPath"], "/etc/ld.so.preload");
        EXPECT_EQ(mounts[2]["hostPath"], kPaths.preload_file);
        EXPECT_EQ(mounts[1]["containerPath"], kPaths.library);
        for (const auto& m : mounts)
            EXPECT_EQ(m["options"], json({"ro", "nosuid", "nodev", "bind"}));
        EXPECT_FALSE(d["containerEdits"].contains("env"));
    }
    EXPECT_EQ(cdi::preload_file_text(kPaths.library), kPaths.library + "\n");
}

TEST(CdiSpec, GpusFromStatusSkipNamesCdiRefuses)
{
    const json status = json::parse(R"({"gpus": [
        {"index": 0, "uuid": "GPU-0a"}, {"index": 1, "uuid": "bad name/x"},
        {"index": 2, "uuid": "GPU-2c"}, {"uuid": "GPU-noindex"}]})");
    const auto gpus = cdi::gpus_from_status(status);
    ASSERT_EQ(gpus.size(), 2u);
    EXPECT_EQ(gpus[0].uuid, "GPU-0a");
    EXPECT_EQ(gpus[1].index, 2u);
    EXPECT_TRUE(cdi::gpus_from_status(json::object()).empty());
}

TEST(CdiSpec, DeviceNamesOfSomethingElseIsAnError)
{
    std::string error;
    EXPECT_TRUE(cdi::device_names(json::array(), &error).empty());
    EXPECT_FALSE(error.empty());
    error.clear();
    EXPECT_TRUE(
        cdi::device_names(json::parse(R"({"kind": "k", "devices": [{}]})"), &error).empty());
    EXPECT_FALSE(error.empty());
}

// Issue 47: a library path with a newline would add a second preload entry
// to every container given the device.
TEST(CdiSpec, PathsMustBeAbsoluteAndTheLibraryOneEntry)
{
    EXPECT_EQ(cdi::path_problem("/usr/lib/x86_64-linux-gnu/libnvshare.so", true), "");
    EXPECT_EQ(cdi::path_problem("/run/nvshare", false), "");
    EXPECT_EQ(cdi::path_problem("lib/libnvshare.so", true),
              "'lib/libnvshare.so' is not an absolute path");
    EXPECT_EQ(cdi::path_problem("/usr/lib/libnvshare.so\n/tmp/evil.so", true),
              "the path contains a control character (a newline, a tab, ...)");
    EXPECT_EQ(cdi::path_problem("/run/nv\tshare", false),
              "the path contains a control character (a newline, a tab, ...)");
    EXPECT_NE(cdi::path_problem("/opt/my lib/libnvshare.so", true).find("splits at spaces"),
              std::string::npos);
    EXPECT_NE(cdi::path_problem("/opt/a:b/libnvshare.so", true).find("splits at spaces"),
              std::string::npos);
    EXPECT_EQ(cdi::path_problem("/opt/my dir/preload", false), "");  // a mount source
}
