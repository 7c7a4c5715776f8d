#include "provisioner/config/config_table.h"

#include <regex>

#include "provisioner/config/toml_reader.h"

namespace kiln::config {

std::optional<Secret> TableScope::secret(TableReader& r, const std::string& key) {
    auto v = r.str(key);
    if (!v) return std::nullopt;
    auto s = Secret::parse(*v, fleet_dir_);
    if (!s) {
        r.ctx().error(r.table().get(key)->source(), r.key_path(key), s.error().message);
        return std::nullopt;
    }
    secrets_.push_back(*s);
    return *s;
}

std::string http_url_problem(const std::string& url) {
    static const std::regex re(R"(^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%-]+)(:\d{1,5})?([/?#]\S*)?$)");
    const auto start = url.find("://");
    if (start != std::string::npos) {
        const auto end = url.find_first_of("/?#", start + 3);
        const std::string authority =
            url.substr(start + 3, end == std::string::npos ? std::string::npos : end - start - 3);
        if (authority.find('@') != std::string::npos)
            return "credentials in the URL are not allowed; use username and password";
    }
    if (!std::regex_match(url, re)) return "expected an http:// or https:// URL with a host";
    return "";
}

}  // namespace kiln::config
