#include "daemon/state_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/files.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

class StateStoreTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        char pattern[] = "/tmp/nvshare-state-test.XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir_ = pattern;
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string dir_;
};

}  // namespace

TEST_F(StateStoreTest, SavesAndLoads)
{
    const StateStore store(dir_ + "/state");  // created on first save
    EXPECT_TRUE(store.load().empty());
    SettingsLayer layer;
    layer.time_quantum = 45s;
    layer.gpu_modes["GPU-aa"] = Mode::Off;
    layer.gpu_time_quanta["GPU-aa"] = 250ms;
    ASSERT_TRUE(store.save(layer));
    EXPECT_EQ(store.load(), layer);
    // Nothing but the file itself is left behind (no temporaries).
    size_t files = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_ + "/state"))
        ++files;
    EXPECT_EQ(files, 1u);
    ASSERT_TRUE(store.clear());
    EXPECT_TRUE(store.load().empty());
    EXPECT_TRUE(store.clear());  // clearing nothing is fine
}

TEST_F(StateStoreTest, CorruptFileIsMovedAsideAndYieldsDefaults)
{
    const StateStore store(dir_);
    std::ofstream(store.path()) << "{\"version\": 1, \"time_quantum_us\": ";
    EXPECT_TRUE(store.load().empty());
    EXPECT_NE(access((store.path() + ".corrupt").c_str(), F_OK), -1);
    EXPECT_EQ(access(store.path().c_str(), F_OK), -1);
}

TEST_F(StateStoreTest, AtomicWriteReplacesAndReportsFailure)
{
    const std::string path = dir_ + "/f";
    std::string error;
    ASSERT_TRUE(write_file_atomically(path, "one", &error)) << error;
    ASSERT_TRUE(write_file_atomically(path, "two", &error)) << error;
    EXPECT_EQ(read_file(path, &error), "two");
    EXPECT_FALSE(write_file_atomically(dir_ + "/missing/f", "x", &error));
    EXPECT_NE(error.find("missing"), std::string::npos) << error;
    EXPECT_FALSE(read_file(dir_ + "/nothing", &error));
    EXPECT_TRUE(error.empty());  // absent is not an error
}
