// Where the nodes of a shared smoke ring ([smoke.NAME] scope = "rack" or
// "fleet") meet before they start kiln-smoke: each node's smoke stage
// arrives here on its own worker thread and waits until every other node of
// the ring has arrived too or can no longer come (not in this run, or its
// pipeline ended). All who met leave with the same member list, so they
// agree on ranks and peers; each then runs the ranks of its own VMs.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "provisioner/core/result.h"
#include "provisioner/engine/stage.h"

namespace kiln::smoke {

class RingMeeting {
public:
    // `ring`: every node of the ring, in fleet order, this one included.
    // Returns the nodes that met (fleet order, this one included); an error
    // when the stage's deadline or a hard stop comes first.
    Result<std::vector<std::string>> meet(engine::StageContext& ctx, const std::vector<std::string>& ring);

private:
    // One meeting per ring; once it closes, the next arrival opens another.
    struct Meeting {
        std::vector<std::string> arrived;
        bool closed = false;
        std::vector<std::string> met;  // set when closed
    };
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::string, std::shared_ptr<Meeting>> open_;  // by ring key
};

}  // namespace kiln::smoke
