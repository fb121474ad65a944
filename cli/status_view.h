// `nvsharectl status`: the daemon's state gathered over D-Bus into one JSON
// document (what --json prints), and the aligned human view of it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace nvshare::cli {

class BusClient;

// Reads every property of the manager and the GPU objects, and ListClients.
nlohmann::json collect_status(BusClient& bus);

// Pure: the document of collect_status as aligned text, one block per GPU.
std::string render_status(const nlohmann::json& status);

// Pure: columns padded to their widest cell, two spaces apart.
std::string format_table(const std::vector<std::vector<std::string>>& rows,
                         const std::string& indent);

}  // namespace nvshare::cli
