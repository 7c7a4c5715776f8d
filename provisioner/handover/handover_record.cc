#include "provisioner/handover/handover_record.h"

#include "provisioner/engine/published.h"

namespace kiln::handover {

using nlohmann::json;

json HandoverRecord::to_json() const {
    return {{"state", state}, {"input_hash", input_hash}, {"summary", summary}, {"hook", hook},
            {"smoke", smoke}, {"failed", failed},         {"ts_ms", ts_ms}};
}

Result<HandoverRecord> read_handover_record(const json& body, int schema, const std::string& node) {
    auto refuse = [&](const std::string& why) {
        return make_error("handover", "handover.record",
                          "the " + std::string(kRecordKind) + " record of " + node + " in the journal: " + why);
    };
    if (schema != kRecordSchema)
        return refuse("schema " + std::to_string(schema) + ", this kiln reads " + std::to_string(kRecordSchema) +
                      " (written by another kiln version)");
    if (!body.is_object()) return refuse("the body is not an object");
    HandoverRecord r;
    for (auto [key, field] : {std::pair<const char*, std::string*>{"state", &r.state},
                              {"input_hash", &r.input_hash},
                              {"summary", &r.summary},
                              {"hook", &r.hook},
                              {"smoke", &r.smoke}}) {
        if (!body.contains(key) || body[key].is_null()) continue;
        if (!body[key].is_string()) return refuse(std::string("'") + key + "' is not a string");
        *field = body[key].get<std::string>();
    }
    if (r.state != "ready" && r.state != "quarantined")
        return refuse("'state' is '" + r.state + "', not ready or quarantined");
    if (body.contains("failed") && !body["failed"].is_null()) {
        if (!body["failed"].is_array()) return refuse("'failed' is not an array");
        r.failed = body["failed"];
    }
    if (body.contains("ts_ms") && !body["ts_ms"].is_null()) {
        if (!body["ts_ms"].is_number()) return refuse("'ts_ms' is not a number");
        r.ts_ms = body["ts_ms"].get<int64_t>();
    }
    return r;
}

Result<HandoverRecord> read_handover_record(const journal::NodeRecord& record) {
    return engine::read_published<HandoverRecord>(
        record, "handover", "handover.record",
        [](const json& body, int schema, const std::string& node) { return read_handover_record(body, schema, node); });
}

}  // namespace kiln::handover
