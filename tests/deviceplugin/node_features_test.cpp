// The features file for node-feature-discovery's local source.
#include "deviceplugin/node_features.h"

#include <gtest/gtest.h>

namespace nvshare::deviceplugin {
namespace {

TEST(NodeFeatures, OneLabelPerLineNamedInNvsharesNamespace)
{
    EXPECT_EQ(node_features_text(10),
              "nvshare.com/gpu.shared=true\nnvshare.com/gpu.shares-per-gpu=10\n");
    EXPECT_EQ(node_features_text(1000),
              "nvshare.com/gpu.shared=true\nnvshare.com/gpu.shares-per-gpu=1000\n");
}

}  // namespace
}  // namespace nvshare::deviceplugin
