#include "provisioner/evidence/secret_scrub.h"

#include <algorithm>

#include <openssl/evp.h>
#include <nlohmann/json.hpp>

namespace kiln::evidence {

namespace {

constexpr const char* kRedacted = "[redacted]";

std::string base64(const std::string& in) {
    std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
}

void add_resolved(SecretScrubber& s, const std::optional<Secret>& secret) {
    if (!secret) return;
    if (auto v = secret->resolve()) s.add(*v);
}

}  // namespace

SecretScrubber SecretScrubber::from_fleet(const config::Fleet& fleet) {
    SecretScrubber s;
    for (const auto& n : fleet.nodes) {
        if (!n.bmc.password) continue;
        if (auto v = n.bmc.password->resolve()) {
            s.add(*v);
            s.add_basic_credentials(n.bmc.username, *v);
        }
    }
    for (const auto& sw : fleet.switches) add_resolved(s, sw.password);
    if (fleet.store) add_resolved(s, fleet.store->password);
    // Stage modules' own tables name theirs ([handover]'s webhook secret).
    for (const auto& [key, table] : fleet.tables)
        for (const auto& secret : table.secrets) add_resolved(s, secret);
    return s;
}

void SecretScrubber::add(const std::string& value) {
    if (value.empty()) return;
    auto put = [this](std::string v) {
        if (v.empty() || std::find(needles_.begin(), needles_.end(), v) != needles_.end()) return;
        needles_.push_back(std::move(v));
    };
    put(value);
    // A secret with quotes or backslashes reads differently inside JSON.
    std::string escaped = nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    put(escaped.substr(1, escaped.size() - 2));
    std::sort(needles_.begin(), needles_.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
}

void SecretScrubber::add_basic_credentials(const std::string& user, const std::string& password) {
    if (password.empty()) return;
    add(base64(user + ":" + password));
}

int SecretScrubber::scrub(std::string& text) const {
    int count = 0;
    for (const auto& needle : needles_) {
        for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos)) {
            text.replace(pos, needle.size(), kRedacted);
            pos += std::char_traits<char>::length(kRedacted);
            ++count;
        }
    }
    return count;
}

bool SecretScrubber::leaks(const std::string& text) const {
    return std::any_of(needles_.begin(), needles_.end(),
                       [&](const std::string& n) { return text.find(n) != std::string::npos; });
}

}  // namespace kiln::evidence
