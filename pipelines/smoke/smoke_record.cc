#include "pipelines/smoke/smoke_record.h"

#include <cstdio>

#include <fmt/format.h>

#include "provisioner/engine/published.h"

namespace kiln::smoke {

using nlohmann::json;

namespace {

// Reads fields of one object; the first that has the wrong type is kept
// as the error, named by its path in the body.
class Fields {
public:
    Fields(const json& obj, std::string path, std::string* error) : obj_(obj), path_(std::move(path)), error_(error) {}

    bool is_object() {
        if (obj_.is_object()) return true;
        fail("", "an object");
        return false;
    }
    std::string text(const char* key, const char* fallback = "") {
        if (!obj_.contains(key) || obj_[key].is_null()) return fallback;
        if (obj_[key].is_string()) return obj_[key].get<std::string>();
        fail(key, "a string");
        return fallback;
    }
    std::optional<double> number(const char* key) {
        if (!obj_.contains(key) || obj_[key].is_null()) return std::nullopt;
        if (obj_[key].is_number()) return obj_[key].get<double>();
        fail(key, "a number");
        return std::nullopt;
    }
    const json* array(const char* key) {
        if (!obj_.contains(key) || obj_[key].is_null()) return nullptr;
        if (obj_[key].is_array()) return &obj_[key];
        fail(key, "an array");
        return nullptr;
    }
    std::string at(const char* key) const { return path_ + (path_.empty() ? "" : ".") + key; }

private:
    void fail(const std::string& key, const char* want) {
        if (!error_->empty()) return;
        const std::string where = key.empty() ? path_ : at(key.c_str());
        *error_ = "'" + (where.empty() ? std::string("(the body)") : where) + "' is not " + want;
    }
    const json& obj_;
    std::string path_;
    std::string* error_;
};

CheckFigure read_check(const json& c, const std::string& path, const std::string& vm, std::string* error) {
    Fields f(c, path, error);
    CheckFigure out;
    if (!f.is_object()) return out;
    out.vm = c.contains("vm") ? f.text("vm") : vm;
    out.name = f.text("name");
    out.figure = f.number("figure");
    out.threshold = f.number("threshold");
    out.unit = f.text("unit");
    out.compare = f.text("compare", ">=");
    out.verdict = f.text("verdict");
    out.detail = f.text("detail");
    out.relative = f.number("relative");
    return out;
}

}  // namespace

Result<SmokeRecord> read_smoke_record(const json& body, int schema, const std::string& node) {
    auto refuse = [&](const std::string& why) {
        return make_error("smoke", "smoke.record",
                          "the " + std::string(kResultKind) + " record of " + node + " in the journal: " + why);
    };
    if (schema != kResultSchema)
        return refuse("schema " + std::to_string(schema) + ", this kiln reads " + std::to_string(kResultSchema) +
                      " (written by another kiln version)");
    std::string error;
    Fields top(body, "", &error);
    if (!top.is_object()) return refuse(error);
    SmokeRecord r;
    r.node = top.text("node");
    r.input_hash = top.text("input_hash");
    r.verdict = top.text("verdict");
    if (auto ts = top.number("ts_ms")) r.ts_ms = static_cast<int64_t>(*ts);
    if (const json* failed = top.array("failed"))
        for (size_t i = 0; i < failed->size(); ++i)
            r.failed.push_back(read_check((*failed)[i], "failed[" + std::to_string(i) + "]", "", &error));
    if (body.contains("thresholds") && !body["thresholds"].is_null()) {
        if (!body["thresholds"].is_object()) return refuse("'thresholds' is not an object");
        for (const auto& [name, v] : body["thresholds"].items()) {
            if (!v.is_number()) return refuse("'thresholds." + name + "' is not a number");
            r.thresholds[name] = v.get<double>();
        }
    }
    if (const json* vms = top.array("vms"))
        for (size_t i = 0; i < vms->size(); ++i) {
            const std::string path = "vms[" + std::to_string(i) + "]";
            const json& v = (*vms)[i];
            Fields f(v, path, &error);
            if (!f.is_object()) break;
            VmResult vm;
            vm.vm = f.text("vm");
            vm.error = f.text("error");
            if (v.contains("report") && !v["report"].is_null()) {
                Fields rep(v["report"], path + ".report", &error);
                if (!rep.is_object()) break;
                vm.has_report = true;
                if (const json* checks = rep.array("checks"))
                    for (size_t k = 0; k < checks->size(); ++k)
                        vm.checks.push_back(read_check((*checks)[k], path + ".report.checks[" + std::to_string(k) + "]",
                                                       vm.vm, &error));
            }
            r.vms.push_back(std::move(vm));
        }
    if (!error.empty()) return refuse(error);
    if (r.verdict != "pass" && r.verdict != "fail") return refuse("'verdict' is '" + r.verdict + "', not pass or fail");
    r.document = body;
    return r;
}

Result<SmokeRecord> read_smoke_record(const journal::NodeRecord& record) {
    return engine::read_published<SmokeRecord>(
        record, "smoke", "smoke.record",
        [](const json& body, int schema, const std::string& node) { return read_smoke_record(body, schema, node); });
}

Result<std::optional<SmokeRecord>> latest_smoke_result(const engine::StageContext& ctx) {
    return engine::latest_published<SmokeRecord>(
        ctx, kResultKind, "smoke", kResultSchema,
        [](const json& body, int schema, const std::string& node) { return read_smoke_record(body, schema, node); });
}

std::string describe_failures(const json& result) {
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
