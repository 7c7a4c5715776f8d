// kiln-smoke's document as JSON, both ways: kiln-smoke writes it, the smoke
// stage, handover and the report read it back.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/check.h"

namespace kiln::smoke {

nlohmann::json to_json(const Check& c);
nlohmann::json to_json(const Report& r);
// Reads a document back. False with a message naming what is missing.
bool from_json(const nlohmann::json& j, Report& out, std::string* err);

}  // namespace kiln::smoke
