// `nvsharectl status --query=FIELDS --format=csv[,noheader]`: one CSV line
// per client with the fields asked for, as nvidia-smi's --query-* does.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nvshare::cli {

struct QueryRequest {
    std::vector<std::string> fields;
    bool header = true;
};

// Every field --query knows, in the order nvsharectl(1) lists them.
const std::vector<std::string>& query_fields();

// Checks --query and --format before anything is asked of nvshared. Returns
// the request, or sets `error` (a sentence naming the bad part) and returns
// nothing.
std::optional<QueryRequest> parse_query(const std::string& fields, const std::string& format,
                                        std::string* error);

// Pure: the CSV text of the status document (RFC 4180 quoting).
std::string render_query(const nlohmann::json& status, const QueryRequest& request);

}  // namespace nvshare::cli
