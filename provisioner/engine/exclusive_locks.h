// Exclusive holds on shared things by name ("switch:spine-1") for one short
// critical section, such as a switch's read, diff and write. A stage's
// resources() hold things for its whole run on a node; a spine carries
// every node's traffic, so holding it per node would run the fabric one
// node at a time. Instead each node holds it only while it changes it.
// In one process a name is one mutex; on a store shared by workers
// (journal::Leases) the holder also takes the name's lock in the database,
// so two workers never change one switch at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "provisioner/core/result.h"
#include "provisioner/engine/stage.h"

namespace kiln::journal {
class Leases;
}

namespace kiln::engine {

class ExclusiveLocks {
public:
    // leases: null in one process (SQLite, a context built by hand). ttl:
    // the database lock's lease, renewed by the worker's heartbeat.
    ExclusiveLocks(journal::Leases* leases, std::chrono::milliseconds ttl) : leases_(leases), ttl_(ttl) {}

    // Waits for `key` until the context's deadline or a hard stop (then
    // fails "exclusive.timeout", naming who holds it). The hold ends when
    // the returned object is destroyed.
    Result<std::unique_ptr<StageContext::Hold>> acquire(const StageContext& ctx, const std::string& key) const;

private:
    journal::Leases* leases_;
    std::chrono::milliseconds ttl_;
};

}  // namespace kiln::engine
