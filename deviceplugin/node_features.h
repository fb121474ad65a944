// The node's labels through node-feature-discovery: a features file for
// nfd-worker's local source, which turns each name=value line into a label.
#pragma once

#include <string>

namespace nvshare::deviceplugin {

// "nvshare.com/gpu.shared=true\nnvshare.com/gpu.shares-per-gpu=N\n".
std::string node_features_text(unsigned shares);

// Writes that text to `path` (its directory made 0755 if missing), 0644 and
// atomically, unless it holds it already; false and *error if not.
bool write_node_features(const std::string& path, unsigned shares, std::string* error);

// Removes the file (missing is fine): the labels go when the plugin stops.
bool remove_node_features(const std::string& path, std::string* error);

}  // namespace nvshare::deviceplugin
