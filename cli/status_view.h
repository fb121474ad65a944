// `nvsharectl status`: the daemon's state as one JSON document (what --json
// prints, the same over D-Bus and the lock socket, status.schema.json), and
// the aligned human view of it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace nvshare::cli {

class BusClient;

// The daemon's document, over D-Bus (GetStatus).
nlohmann::json collect_status(BusClient& bus);

// Adds "user" (the name of "uid", else the number) to every client.
void add_user_names(nlohmann::json& status);

// A client's command line where nvshared read one, else the command name it
// gave (an nvshared that sends none, or a process whose /proc entry it could
// not read).
std::string client_command(const nlohmann::json& client);

// Pure: the document as aligned text, one block per GPU. Without `full`,
// commands longer than a column's share are cut with "...".
std::string render_status(const nlohmann::json& status, bool full = false);

// Pure: columns padded to their widest cell, two spaces apart.
std::string format_table(const std::vector<std::vector<std::string>>& rows,
                         const std::string& indent);

}  // namespace nvshare::cli
