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

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"
#include "provisioner/engine/stage.h"

namespace kiln::smoke {

class RingMeeting {
public:
    // `ring`: every node of the ring, in fleet order, this one included.
    // Returns the nodes that met (fleet order, this one included); an error
    // when the stage's deadline or a hard stop comes first.
    Result<std::vector<std::string>> meet(engine::StageContext& ctx, const std::vector<std::string>& ring);

    // After the ring has run: every node that met posts `value` under
    // `topic` (the ring's figures, a localisation's outcome) and gets every
    // member's post, once each member has posted or can no longer (its
    // pipeline ended). An error when the stage's deadline or a hard stop
    // comes first.
    Result<std::map<std::string, nlohmann::json>> exchange(engine::StageContext& ctx, const std::string& topic,
                                                           const std::vector<std::string>& members,
                                                           nlohmann::json value);

    // Posts without waiting: a node that leaves the ring early (an error)
    // still tells the others, so that none waits for it.
    void post(engine::StageContext& ctx, const std::string& topic, const std::vector<std::string>& members,
              nlohmann::json value);

private:
    std::string board_key(const std::string& topic, const std::vector<std::string>& members) const;
    struct Board {
        std::map<std::string, nlohmann::json> posted;
        size_t taken = 0;
    };
    std::map<std::string, std::shared_ptr<Board>> boards_;  // by topic and members
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
