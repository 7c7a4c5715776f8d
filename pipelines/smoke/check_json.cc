#include "pipelines/smoke/check_json.h"

#include <cmath>

namespace kiln::smoke {

nlohmann::json to_json(const Check& c) {
    nlohmann::json j = {{"name", c.name},
                        {"figure", std::isfinite(c.figure) ? nlohmann::json(c.figure) : nlohmann::json(nullptr)},
                        {"threshold", c.threshold ? nlohmann::json(*c.threshold) : nlohmann::json(nullptr)},
                        {"unit", c.unit},
                        {"compare", c.compare},
                        {"verdict", verdict_name(c.verdict)},
                        {"detail", c.detail}};
    return j;
}

nlohmann::json to_json(const Report& r) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : r.checks) checks.push_back(to_json(c));
    nlohmann::json j = {{"host", r.host},   {"backend", r.backend}, {"rank", r.rank},
                        {"ranks", r.ranks}, {"checks", checks},     {"verdict", verdict_name(r.verdict())}};
    if (!r.nvml.is_null()) j["nvml"] = r.nvml;
    if (!r.rdma.is_null()) j["rdma"] = r.rdma;
    return j;
}

bool from_json(const nlohmann::json& j, Report& out, std::string* err) {
    auto fail = [&](const std::string& m) {
        if (err) *err = m;
        return false;
    };
    if (!j.is_object()) return fail("expected a JSON object");
    if (!j.contains("checks") || !j["checks"].is_array()) return fail("missing 'checks' array");
    Report r;
    r.host = j.value("host", "");
    r.backend = j.value("backend", "cpu");
    r.rank = j.value("rank", 0);
    r.ranks = j.value("ranks", 1);
    if (j.contains("nvml")) r.nvml = j["nvml"];
    if (j.contains("rdma")) r.rdma = j["rdma"];
    for (const auto& cj : j["checks"]) {
        if (!cj.is_object() || !cj.contains("name") || !cj["name"].is_string()) return fail("a check without a 'name'");
        Check c;
        c.name = cj["name"].get<std::string>();
        if (cj.contains("figure") && cj["figure"].is_number())
            c.figure = cj["figure"].get<double>();
        else
            c.figure = std::nan("");
        if (cj.contains("threshold") && cj["threshold"].is_number()) c.threshold = cj["threshold"].get<double>();
        c.unit = cj.value("unit", "");
        c.compare = cj.value("compare", ">=");
        auto v = parse_verdict(cj.value("verdict", ""));
        if (!v) return fail("check '" + c.name + "': verdict must be pass, fail or skip");
        c.verdict = *v;
        c.detail = cj.value("detail", "");
        r.checks.push_back(std::move(c));
    }
    out = std::move(r);
    return true;
}

}  // namespace kiln::smoke
