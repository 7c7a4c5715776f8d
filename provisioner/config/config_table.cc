#include "provisioner/config/config_table.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "provisioner/config/toml_reader.h"

namespace kiln::config {

std::optional<Secret> TableScope::secret(TableReader& r, const std::string& key) {
    auto v = r.str(key);
    if (!v) return std::nullopt;
    auto s = Secret::parse(*v, fleet_dir_);
    if (!s) {
        // The message never carries the value: it may be the secret.
        r.ctx().error(r.table().get(key)->source(), r.key_path(key), s.error().message);
        return std::nullopt;
    }
    secrets_.push_back(*s);
    return *s;
}

std::string TableScope::path(const std::string& p) const {
    return resolve_path(fleet_dir_, p);
}

std::string resolve_path(const std::string& dir, const std::string& p) {
    std::filesystem::path out(p);
    if (out.is_relative()) out = std::filesystem::path(dir) / out;
    return out.lexically_normal().string();
}

void each_named_table(TableReader& table, const std::function<void(const std::string& name, TableReader& r)>& each) {
    static const std::regex profile_name(R"(^[A-Za-z0-9][A-Za-z0-9._-]*$)");
    const auto& ctx = table.ctx();
    for (const auto& [k, v] : table.table()) {
        const std::string name(k.str());
        const std::string path = table.key_path(name);
        table.node(name);  // known: each is reported here, not as unknown
        if (!std::regex_match(name, profile_name)) {
            ctx.error(k.source(), path, "expected a name of letters, digits, '.', '_' and '-'");
            continue;
        }
        if (!v.is_table()) {
            ctx.error(v.source(), path, fmt::format("expected table, found {}", toml_type_name(v)));
            continue;
        }
        TableReader r(ctx, *v.as_table(), path);
        each(name, r);
        r.finish();
    }
}

bool is_sha256_hex(const std::string& s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c); });
}

bool is_linux_ifname(const std::string& s) {
    static const std::regex re(R"(^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$)");
    return std::regex_match(s, re);
}

std::string ascii_lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
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
