// Where the nodes of a shared smoke ring ([smoke.NAME] scope = "rack" or
// "fleet") meet before they start kiln-smoke: each node's smoke stage
// arrives here and waits until every other node of the ring has arrived too
// or can no longer come (not in this run, or its pipeline ended). All who
// met leave with the same member list, so they agree on ranks and peers;
// each then runs the ranks of its own VMs. Under the engine a node waits
// parked (arrive()), holding no thread: a ring of thousands meets on a pool
// sized to the cores.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
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

    // meet() for a context that can park: arrives (on the node's first
    // call of the run; a resumed call finds its arrival) and returns the
    // members once the ring has met, else nullopt and `waiting` says for
    // whom: park on wake_key(ring) and call again when resumed. The node
    // that closes the meeting wakes the others by that key. A node whose
    // wait ended (deadline, stop) is not counted among those who met: its
    // pipeline has ended.
    Result<std::optional<std::vector<std::string>>> arrive(engine::StageContext& ctx,
                                                           const std::vector<std::string>& ring, std::string* waiting);
    static std::string wake_key(const std::vector<std::string>& ring);

    // After the ring has run: every node that met posts `value` under
    // `topic` (the ring's figures, a localisation's outcome) and gets every
    // member's post, once each member has posted or can no longer (its
    // pipeline ended). An error when the stage's deadline or a hard stop
    // comes first.
    Result<std::map<std::string, nlohmann::json>> exchange(engine::StageContext& ctx, const std::string& topic,
                                                           const std::vector<std::string>& members,
                                                           nlohmann::json value);

    // exchange() for a context that can park: posts `value` (none on a
    // resumed call: it was posted before the park) and returns every
    // member's post once complete, else nullopt and `waiting` says whose is
    // missing: park on board_wake_key(topic, members) and call again when
    // resumed. The post that completes the board wakes the others.
    Result<std::optional<std::map<std::string, nlohmann::json>>> gather(engine::StageContext& ctx,
                                                                        const std::string& topic,
                                                                        const std::vector<std::string>& members,
                                                                        std::optional<nlohmann::json> value,
                                                                        std::string* waiting);
    static std::string board_wake_key(const std::string& topic, const std::vector<std::string>& members);

    // Posts without waiting: a node that leaves the ring early (an error)
    // still tells the others, so that none waits for it.
    void post(engine::StageContext& ctx, const std::string& topic, const std::vector<std::string>& members,
              nlohmann::json value);

    // At the end of a run: drops every meeting, board and arrival that
    // names one of `nodes`, so that none left by a node whose wait ended
    // (deadline, stop) is found by the next run.
    void forget(const std::vector<std::string>& nodes);

private:
    static std::string board_key(const std::string& topic, const std::vector<std::string>& members);
    struct Board {
        std::vector<std::string> members;
        std::map<std::string, nlohmann::json> posted;
        size_t taken = 0;
    };
    std::shared_ptr<Board> board(const std::string& topic, const std::vector<std::string>& members);  // under mu_
    // Every member's post once those who can still post have: taken by the
    // caller (the last to take clears the board). Else nullopt and who is
    // missing. Under mu_.
    std::optional<std::map<std::string, nlohmann::json>> take_if_complete(engine::StageContext& ctx,
                                                                          const std::string& key,
                                                                          const std::shared_ptr<Board>& b,
                                                                          std::string* missing);
    std::map<std::string, std::shared_ptr<Board>> boards_;  // by topic and members
    // One meeting per ring; once it closes, the next arrival opens another.
    struct Meeting {
        std::vector<std::string> arrived;
        bool closed = false;
        std::vector<std::string> met;  // set when closed
    };
    // Closes `m` when no node that can still come is missing: the members
    // are who arrived and can still go on (`self` can). Else the missing,
    // joined by ", ". Under mu_.
    std::optional<std::vector<std::string>> close_if_met(engine::StageContext& ctx, const std::string& key,
                                                         const std::shared_ptr<Meeting>& m,
                                                         const std::vector<std::string>& ring, std::string* missing);
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::string, std::shared_ptr<Meeting>> open_;  // by ring key
    // The meeting each parked node arrived at, by node: it may close (and
    // leave open_) while the node is parked.
    std::map<std::string, std::shared_ptr<Meeting>> joined_;
};

}  // namespace kiln::smoke
