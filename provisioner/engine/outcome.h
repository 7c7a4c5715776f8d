// The engine's verdicts as types: a run's status, a node's state, a plan
// entry's status. Spelled as strings only at the edges (journal rows,
// `--json`, printed tables, events), through to_string and parse_node_state.
#pragma once

#include <optional>
#include <ostream>
#include <string_view>

namespace kiln::engine {

enum class RunStatus { Completed, Failed, Interrupted };
enum class NodeState { Pending, Running, Failed, Quarantined, Ready };
enum class PlanStatus { Converged, Work, Error };

constexpr const char* to_string(RunStatus s) {
    switch (s) {
        case RunStatus::Completed:
            return "completed";
        case RunStatus::Failed:
            return "failed";
        case RunStatus::Interrupted:
            return "interrupted";
    }
    return "failed";
}

constexpr const char* to_string(NodeState s) {
    switch (s) {
        case NodeState::Pending:
            return "pending";
        case NodeState::Running:
            return "running";
        case NodeState::Failed:
            return "failed";
        case NodeState::Quarantined:
            return "quarantined";
        case NodeState::Ready:
            return "ready";
    }
    return "failed";
}

constexpr const char* to_string(PlanStatus s) {
    switch (s) {
        case PlanStatus::Converged:
            return "converged";
        case PlanStatus::Work:
            return "work";
        case PlanStatus::Error:
            return "error";
    }
    return "error";
}

// A node state as the journal spells it; nullopt for a spelling this kiln
// does not know (a journal written by another version).
constexpr std::optional<NodeState> parse_node_state(std::string_view s) {
    for (auto st :
         {NodeState::Pending, NodeState::Running, NodeState::Failed, NodeState::Quarantined, NodeState::Ready})
        if (s == to_string(st)) return st;
    return std::nullopt;
}

// Failure messages (Catch) and logs print the spelling, not a number.
inline std::ostream& operator<<(std::ostream& o, RunStatus s) {
    return o << to_string(s);
}
inline std::ostream& operator<<(std::ostream& o, NodeState s) {
    return o << to_string(s);
}
inline std::ostream& operator<<(std::ostream& o, PlanStatus s) {
    return o << to_string(s);
}

}  // namespace kiln::engine
