// The rates clients measured on a GPU: which figures are measurements, how a
// report merges into what the GPU knows, and their JSON form.
#include "daemon/measured_rates.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace nvshare::daemon {
namespace {

TEST(MeasuredRates, AFigureIsZeroOrWithinTheBounds)
{
    EXPECT_TRUE(plausible({}));
    EXPECT_TRUE(plausible({proto::kMinRate, proto::kMaxRate, 0, 0, 0}));
    EXPECT_FALSE(plausible({proto::kMinRate - 1, 0, 0, 0, 0}));
    EXPECT_FALSE(plausible({0, 0, 0, 0, proto::kMaxRate + 1}));
    EXPECT_FALSE(plausible({0, 0, 1, 0, 0}));
}

// Each figure a report has replaces the GPU's; a figure it lacks (0) leaves
// it. "Learned" only where the GPU lacked a figure it now has.
TEST(MeasuredRates, AReportReplacesTheFiguresItHas)
{
    MeasuredRates known;
    EXPECT_FALSE(merge(known, {}));
    EXPECT_FALSE(known.any());
    EXPECT_TRUE(merge(known, {50, 0, 0, 0, 20}));
    EXPECT_EQ(known, (MeasuredRates{50, 0, 0, 0, 20}));
    EXPECT_FALSE(merge(known, {55, 0, 0, 0, 0}));  // a new figure, none learned
    EXPECT_EQ(known, (MeasuredRates{55, 0, 0, 0, 20}));
    EXPECT_TRUE(merge(known, {0, 54, 0, 0, 0}));
    EXPECT_EQ(known, (MeasuredRates{55, 54, 0, 0, 20}));
    EXPECT_TRUE(known.any());
}

TEST(MeasuredRates, TheWireCarriesEveryFigureAndTheIndex)
{
    const MeasuredRates r{1, 2, 3, 4, 5};
    const proto::RatesPayload p = rates_to_wire(r, 7);
    EXPECT_EQ(p.gpu, 7u);
    EXPECT_EQ(p.reserved, 0u);
    EXPECT_EQ(rates_from_wire(p), r);
}

TEST(MeasuredRates, JsonRoundTripsAndRefusesWhatIsNoEntry)
{
    const MeasuredRates r{55'000'000'000, 54'000'000'000, 0, 48'000'000'000, 25'000'000'000};
    const nlohmann::json j = rates_json(r);
    EXPECT_EQ(j["engine_out"], 55'000'000'000u);
    EXPECT_EQ(j["evict"], 0u);
    EXPECT_EQ(rates_from_json(j), r);
    EXPECT_EQ(rates_from_json(nlohmann::json::parse(j.dump())), r);

    nlohmann::json missing = j;
    missing.erase("host_pin");
    EXPECT_FALSE(rates_from_json(missing));
    nlohmann::json negative = j;
    negative["evict"] = -1;
    EXPECT_FALSE(rates_from_json(negative));
    nlohmann::json text = j;
    text["evict"] = "fast";
    EXPECT_FALSE(rates_from_json(text));
    nlohmann::json implausible = j;
    implausible["engine_in"] = 5;
    EXPECT_FALSE(rates_from_json(implausible));
    EXPECT_FALSE(rates_from_json(nlohmann::json::array()));
    EXPECT_FALSE(rates_from_json(nullptr));
}

}  // namespace
}  // namespace nvshare::daemon
