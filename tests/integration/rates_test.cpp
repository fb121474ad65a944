// The rates clients measured on a GPU (Rates, KnownRates): each new client
// gets them after its Welcome, status reports show them, they survive a
// restart in the state directory, and a rate that is no measurement is
// refused with a clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/lock_client.h"
#include "common/protocol.h"
#include "tests/integration/as_user.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/test_gpu.h"
#include "tests/support/wait.h"
#include "tests/support/welcomed.h"

namespace nvshare::test {
namespace {

using proto::MsgType;
using proto::RatesPayload;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// The KnownRates that follows the Welcome of a client of GPU 0.
std::optional<RatesPayload> known_rates(const Daemon& d, const std::string& comm)
{
    auto c = welcomed(d.socket(), comm, {test_gpu(0, 16 * kGiB)});
    if (!c)
        return std::nullopt;
    const auto f = c->expect(MsgType::KnownRates, kTimeout);
    if (!f || f->payload.size() != sizeof(RatesPayload))
        return std::nullopt;
    return f->as<RatesPayload>();
}

void expect_rates(const RatesPayload& r, uint64_t out, uint64_t in, uint64_t evict,
                  uint64_t prefetch, uint64_t pin)
{
    EXPECT_EQ(r.gpu, 0u);
    EXPECT_EQ(r.engine_out, out);
    EXPECT_EQ(r.engine_in, in);
    EXPECT_EQ(r.evict, evict);
    EXPECT_EQ(r.prefetch, prefetch);
    EXPECT_EQ(r.host_pin, pin);
}

TEST(Rates, KnownRatesFollowTheWelcomeAndSurviveARestart)
{
    TempDir dir;
    Daemon d(dir);
    ASSERT_TRUE(d.start());
    // Nobody measured anything yet: zeros.
    const auto first = known_rates(d, "first");
    ASSERT_TRUE(first);
    expect_rates(*first, 0, 0, 0, 0, 0);

    auto a = welcomed(d.socket(), "a", {test_gpu(0, 16 * kGiB)});
    ASSERT_TRUE(a);
    RatesPayload r{0, 0, 55'000'000'000, 54'000'000'000, 0, 0, 25'000'000'000};
    ASSERT_TRUE(a->send(MsgType::Rates, &r, sizeof r));
    // A later report of only some figures leaves the others.
    RatesPayload more{0, 0, 0, 53'000'000'000, 16'000'000'000, 48'000'000'000, 0};
    ASSERT_TRUE(a->send(MsgType::Rates, &more, sizeof more));
    ASSERT_TRUE(wait_until([&] {
        const auto g = Daemon::gpu_by_number(d.status(), 0);
        return !g.is_null() && g["rates"]["prefetch"] == 48'000'000'000u;
    })) << d.status().dump(2);
    const auto rates = Daemon::gpu_by_number(d.status(), 0)["rates"];
    EXPECT_EQ(rates["engine_out"], 55'000'000'000u);
    EXPECT_EQ(rates["engine_in"], 53'000'000'000u);
    EXPECT_EQ(rates["evict"], 16'000'000'000u);
    EXPECT_EQ(rates["host_pin"], 25'000'000'000u);

    const auto second = known_rates(d, "second");
    ASSERT_TRUE(second);
    expect_rates(*second, 55'000'000'000, 53'000'000'000, 16'000'000'000, 48'000'000'000,
                 25'000'000'000);

    // Kept in the state directory across a restart.
    a->close();
    EXPECT_EQ(d.stop(), 0) << d.log();
    EXPECT_TRUE(std::filesystem::exists(dir / "state/rates.json")) << d.log();
    ASSERT_TRUE(d.restart());
    const auto after = known_rates(d, "after");
    ASSERT_TRUE(after);
    expect_rates(*after, 55'000'000'000, 53'000'000'000, 16'000'000'000, 48'000'000'000,
                 25'000'000'000);
}

// A figure outside 10 MB/s .. 10 TB/s is no measurement: the client is told
// why and disconnected, and the GPU's rates are unchanged. So is a report
// for a GPU the client did not name.
TEST(Rates, ARateThatIsNoMeasurementIsRefused)
{
    Daemon d;
    ASSERT_TRUE(d.start());
    auto good = welcomed(d.socket(), "good", {test_gpu(0, 16 * kGiB)});
    ASSERT_TRUE(good);
    RatesPayload r{0, 0, 50'000'000'000, 0, 0, 0, 0};
    ASSERT_TRUE(good->send(MsgType::Rates, &r, sizeof r));

    for (const RatesPayload& bad :
         {RatesPayload{0, 0, 1, 0, 0, 0, 0}, RatesPayload{0, 0, 0, 0, 0, 0, proto::kMaxRate + 1},
          RatesPayload{3, 0, 50'000'000'000, 0, 0, 0, 0}}) {
        auto liar = welcomed(d.socket(), "liar", {test_gpu(0, 16 * kGiB)});
        ASSERT_TRUE(liar);
        ASSERT_TRUE(liar->send(MsgType::Rates, &bad, sizeof bad));
        const auto e = liar->expect(MsgType::Error, kTimeout);
        ASSERT_TRUE(e);
        EXPECT_EQ(e->as<proto::ErrorFixed>().code,
                  static_cast<uint32_t>(proto::ErrorCode::BadValue));
        const std::string text = e->text(sizeof(proto::ErrorFixed));
        EXPECT_TRUE(text.find("rate") != std::string::npos) << text;
    }
    const auto rates = Daemon::gpu_by_number(d.status(), 0)["rates"];
    EXPECT_EQ(rates["engine_out"], 50'000'000'000u) << rates.dump();
    EXPECT_EQ(rates["host_pin"], 0u) << rates.dump();
}

// Any user may name a GPU the host does not list; the rates reported for
// one are shown and handed on while the daemon runs, but not written to
// rates.json, which would otherwise grow with made-up GPUs across restarts.
// Those of a GPU whose size a client of root gave are kept.
TEST(Rates, ThoseOfAGpuAnyUserCouldMakeUpAreNotKept)
{
    if (getuid() != 0)
        GTEST_SKIP() << "other users' clients need root";
    TempDir dir;
    Daemon d(dir);
    ASSERT_TRUE(d.start());
    AsUser nobody(65534, [&](FILE* out, int stop) {
        auto c = welcomed(d.socket(), "made-up", {test_gpu(9, 16 * kGiB)});
        RatesPayload r{0, 0, 0, 0, 0, 0, 20'000'000'000};
        fprintf(out, "%s\n", c && c->send(MsgType::Rates, &r, sizeof r) ? "sent" : "refused");
        wait_for_stop(stop);
    });
    ASSERT_EQ(nobody.line(), "sent");
    ASSERT_TRUE(wait_until([&] {
        const auto g = Daemon::gpu_by_number(d.status(), 9);
        return !g.is_null() && g["rates"]["host_pin"] == 20'000'000'000u;
    })) << d.status().dump(2);
    auto root = welcomed(d.socket(), "root", {test_gpu(0, 16 * kGiB)});
    ASSERT_TRUE(root);
    RatesPayload r{0, 0, 0, 0, 0, 0, 21'000'000'000};
    ASSERT_TRUE(root->send(MsgType::Rates, &r, sizeof r));
    ASSERT_TRUE(wait_until([&] {
        return read_text(dir / "state/rates.json").find("21000000000") != std::string::npos;
    })) << d.log();
    nobody.finish();
    root->close();
    EXPECT_EQ(d.stop(), 0) << d.log();
    const std::string kept = read_text(dir / "state/rates.json");
    EXPECT_NE(kept.find("21000000000"), std::string::npos) << kept;
    EXPECT_EQ(kept.find("20000000000"), std::string::npos) << kept;
}

// A rates.json that is not JSON is reported and ignored: the daemon starts
// with no rates and replaces it at the next save.
TEST(Rates, ACorruptRatesFileIsIgnored)
{
    TempDir dir;
    std::filesystem::create_directories(dir / "state");
    write_text(dir / "state/rates.json", "{not json");
    Daemon d(dir);
    ASSERT_TRUE(d.start());
    const auto r = known_rates(d, "c");
    ASSERT_TRUE(r);
    expect_rates(*r, 0, 0, 0, 0, 0);
    EXPECT_NE(d.log().find("rates.json is not a JSON object"), std::string::npos) << d.log();
    auto a = welcomed(d.socket(), "a", {test_gpu(0, 16 * kGiB)});
    ASSERT_TRUE(a);
    RatesPayload p{0, 0, 0, 0, 0, 0, 20'000'000'000};
    ASSERT_TRUE(a->send(MsgType::Rates, &p, sizeof p));
    EXPECT_TRUE(wait_until([&] {
        return read_text(dir / "state/rates.json").find("20000000000") != std::string::npos;
    })) << read_text(dir / "state/rates.json");
}

}  // namespace
}  // namespace nvshare::test
