#include "daemon/rates_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "daemon/files.h"
#include "daemon/log.h"

namespace nvshare::daemon {

RatesStore::RatesStore(std::string directory)
    : directory_(std::move(directory)), path_(directory_ + "/rates.json")
{
}

std::map<std::string, MeasuredRates> RatesStore::load() const
{
    std::map<std::string, MeasuredRates> rates;
    std::string error;
    const auto text = read_file(path_, &error);
    if (!text) {
        if (!error.empty())
            NVS_WARN("%s; measured rates start unknown", error.c_str());
        return rates;
    }
    const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
    if (!doc.is_object()) {
        NVS_WARN("%s is not a JSON object; measured rates start unknown", path_.c_str());
        return rates;
    }
    for (const auto& [uuid, entry] : doc.items()) {
        if (auto r = rates_from_json(entry); r && r->any())
            rates[uuid] = *r;
        else
            NVS_WARN("%s: the entry of %s is not one of measured rates; left out", path_.c_str(),
                     uuid.c_str());
    }
    return rates;
}

bool RatesStore::save(const std::map<std::string, MeasuredRates>& rates) const
{
    // One level, as systemd's StateDirectory= would have made it.
    if (mkdir(directory_.c_str(), 0755) < 0 && errno != EEXIST) {
        NVS_WARN("cannot create %s: %s; measured rates will not survive a restart",
                 directory_.c_str(), strerror(errno));
        return false;
    }
    nlohmann::json doc = nlohmann::json::object();
    for (const auto& [uuid, r] : rates)
        doc[uuid] = rates_json(r);
    std::string error;
    if (!write_file_atomically(path_, doc.dump(2) + "\n", &error)) {
        NVS_WARN("%s; measured rates will not survive a restart", error.c_str());
        return false;
    }
    return true;
}

}  // namespace nvshare::daemon
