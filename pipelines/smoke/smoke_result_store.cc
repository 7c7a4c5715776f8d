#include "pipelines/smoke/smoke_result_store.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace kiln::smoke {

namespace fs = std::filesystem;

std::string smoke_state_dir(const config::Fleet& fleet, const std::string& state_dir) {
    if (!state_dir.empty()) return state_dir;
    return (fs::path(fleet.dir) / ".kiln" / "smoke").string();
}

Status save_result(const std::string& dir, const std::string& node, const nlohmann::json& result) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return make_error("smoke", "smoke.state", "cannot create " + dir + ": " + ec.message());
    const auto path = fs::path(dir) / (node + ".json");
    const auto tmp = fs::path(dir) / (node + ".json.tmp");
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << result.dump(2) << "\n";
        if (!out) return make_error("smoke", "smoke.state", "cannot write " + tmp.string());
    }
    fs::rename(tmp, path, ec);  // atomic: a crash leaves the old result or the new one
    if (ec) return make_error("smoke", "smoke.state", "cannot write " + path.string() + ": " + ec.message());
    return ok_status();
}

std::optional<nlohmann::json> load_result(const std::string& dir, const std::string& node) {
    std::ifstream in(fs::path(dir) / (node + ".json"), std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    auto j = nlohmann::json::parse(s.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return j;
}

std::string describe_failures(const nlohmann::json& result) {
    std::string out;
    if (!result.contains("failed") || !result["failed"].is_array()) return out;
    for (const auto& f : result["failed"]) {
        std::string one = f.value("vm", "") + " " + f.value("name", "");
        if (f.contains("figure") && f["figure"].is_number() && f.contains("threshold") && f["threshold"].is_number()) {
            char buf[128];
            const bool ceiling = f.value("compare", ">=") == "<=";
            std::snprintf(buf, sizeof buf, " %.4g %s %.4g %s", f["figure"].get<double>(), ceiling ? ">" : "<",
                          f["threshold"].get<double>(), f.value("unit", "").c_str());
            one += buf;
            if (f.contains("relative") && f["relative"].is_number())
                one += fmt::format(" ({:.2f} of the ring's median)", f["relative"].get<double>());
        } else if (!f.value("detail", "").empty()) {
            one += ": " + f.value("detail", "");
        }
        out += (out.empty() ? "" : "; ") + one;
    }
    return out;
}

}  // namespace kiln::smoke
