#include "common/driver_gpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "common/text.h"

namespace nvshare {

std::optional<DriverGpu> parse_driver_gpu(std::string_view text)
{
    DriverGpu d;
    while (!text.empty()) {
        const size_t eol = text.find('\n');
        std::string_view line = text.substr(0, eol);
        text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos)
            continue;
        const std::string_view key = trim(line.substr(0, colon));
        const std::string_view value = trim(line.substr(colon + 1));
        if (key == "Model")
            d.model = value;
        else if (key == "GPU UUID")
            d.uuid = value;
    }
    // Only the form clients report ("GPU-" + 36 characters) can ever match.
    if (d.uuid.size() != 40 || d.uuid.rfind("GPU-", 0) != 0)
        return std::nullopt;
    return d;
}

std::vector<DriverGpu> driver_gpus(const std::string& dir)
{
    std::vector<std::pair<std::string, DriverGpu>> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        std::ifstream in(entry.path() / "information");
        if (!in)
            continue;
        std::ostringstream text;
        text << in.rdbuf();
        if (auto d = parse_driver_gpu(text.str()))
            found.emplace_back(entry.path().filename().string(), std::move(*d));
    }
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<DriverGpu> out;
    for (auto& [bus, d] : found)
        out.push_back(std::move(d));
    return out;
}

}  // namespace nvshare
