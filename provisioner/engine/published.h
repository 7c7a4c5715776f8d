// Reading a stage's published records typed (StageContext::publish and
// latest; journal NodeRecord). Each record type brings its reader,
//   Result<T> read(const nlohmann::json& body, int schema, const std::string& node),
// and these give it the journal's row, or a stage's newest record with the
// file an older kiln kept as the fallback (journal/legacy_state.h).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"
#include "provisioner/engine/stage.h"
#include "provisioner/journal/legacy_state.h"
#include "provisioner/journal/store.h"

namespace kiln::engine {

// The journal's row (its body is JSON text) through `read`; a body that is
// not JSON is an error with `domain` and `code`.
template <class T, class Read>
Result<T> read_published(const journal::NodeRecord& record, const std::string& domain, const std::string& code,
                         Read&& read) {
    auto body = nlohmann::json::parse(record.body, nullptr, false);
    if (body.is_discarded())
        return make_error(domain, code,
                          "the " + record.kind + " record of " + record.node + " in the journal is not JSON");
    return read(body, record.schema, record.node);
}

// The context's node's newest `kind` record through `read`; where the
// journal has none, the file an older kiln kept for `legacy_stage`, read as
// schema `legacy_schema` (one that does not read counts as none: the stage
// runs again). nullopt: no record.
template <class T, class Read>
Result<std::optional<T>> latest_published(const StageContext& ctx, const std::string& kind,
                                          const std::string& legacy_stage, int legacy_schema, Read&& read) {
    const auto& node = ctx.node().name;
    auto published = ctx.latest(kind);
    if (!published) return published.error();
    if (*published) {
        Result<T> r = read((*published)->body, (*published)->schema, node);
        if (!r) return r.error();
        return std::optional<T>(std::move(*r));
    }
    auto legacy = journal::read_legacy_state(ctx.fleet().dir, legacy_stage, node);
    if (!legacy) return std::optional<T>();
    Result<T> r = read(*legacy, legacy_schema, node);
    if (!r) return std::optional<T>();
    return std::optional<T>(std::move(*r));
}

}  // namespace kiln::engine
