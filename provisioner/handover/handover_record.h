// Handover's verdict as it publishes it in the journal (record kind
// "handover", schema 1): what its own observe and verify read, and what
// the evidence bundle and `kiln report` show.
//
// {"state": "ready"|"quarantined", "input_hash" ("" when quarantined),
//  "summary" (one line for people), "hook" (what the hook said, or
//  "no hook configured"), "smoke" (the smoke verdict handed on, or "not run"),
//  "failed" (quarantined: the smoke result's failed checks), "ts_ms"}
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"
#include "provisioner/journal/store.h"

namespace kiln::handover {

inline constexpr const char* kRecordKind = "handover";
inline constexpr int kRecordSchema = 1;

struct HandoverRecord {
    std::string state;  // ready | quarantined
    std::string input_hash;
    std::string summary;
    std::string hook;
    std::string smoke;  // pass | fail | not run
    nlohmann::json failed = nlohmann::json::array();
    int64_t ts_ms = 0;

    nlohmann::json to_json() const;
    bool ready_for(const std::string& hash) const { return state == "ready" && input_hash == hash; }
};

// A schema this kiln does not know, or a field of the wrong type, is an
// error ("handover.record") naming the node and field.
Result<HandoverRecord> read_handover_record(const nlohmann::json& body, int schema, const std::string& node);
Result<HandoverRecord> read_handover_record(const journal::NodeRecord& record);

}  // namespace kiln::handover
