#include "daemon/gpu_discovery.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "daemon/text.h"
#include "daemon/printable_text.h"

namespace nvshare::daemon {

std::optional<GpuDescription> parse_gpu_information(std::string_view text)
{
    GpuDescription d;
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
            d.name = printable_utf8(value);
        else if (key == "GPU UUID")
            d.uuid = value;
    }
    // Only the form clients report ("GPU-" + 36 characters) can ever match.
    if (d.uuid.size() != 40 || d.uuid.rfind("GPU-", 0) != 0)
        return std::nullopt;
    return d;
}

std::vector<GpuDescription> discover_gpus(const std::string& dir)
{
    std::vector<std::pair<std::string, GpuDescription>> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        std::ifstream in(entry.path() / "information");
        if (!in)
            continue;
        std::ostringstream text;
        text << in.rdbuf();
        if (auto d = parse_gpu_information(text.str()))
            found.emplace_back(entry.path().filename().string(), std::move(*d));
    }
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<GpuDescription> out;
    for (auto& [bus, d] : found)
        out.push_back(std::move(d));
    return out;
}

}  // namespace nvshare::daemon
