// The journal behind StageContext::publish and latest: a stage's records
// go into the store as NodeRecords of the run and stage, and come back
// parsed.
#pragma once

#include <cstdint>

#include "provisioner/engine/stage.h"
#include "provisioner/journal/store.h"

namespace kiln::engine {

// `store` null: nothing is wired (publish fails, latest finds none).
// `run_id` 0 (a plan): the context reads only.
void wire_records(StageContext& ctx, journal::Store* store, int64_t run_id);

}  // namespace kiln::engine
