// `kiln worker`: one of several processes sharing a fleet through a
// PostgreSQL store. It runs the engine as `kiln apply` does, over the nodes
// whose labels it serves, claiming each node-stage as a lease (see
// journal/leases.h and docs/store.md), until none of its nodes has work left
// or it is signalled.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"
#include "provisioner/engine/engine.h"
#include "provisioner/journal/leases.h"

namespace kiln::cli {

struct WorkerArgs {
    std::string fleet;
    std::vector<std::string> labels;  // "key=value", all must match
    std::vector<std::string> stages;
    std::string lease_ttl = "30s";
    std::string poll = "1s";
    std::string worker_id;  // "" = host:pid:nonce
    bool as_json = false;
    std::string metrics_listen;  // HOST:PORT for Prometheus; "" = none
};

CLI::App* add_worker_command(CLI::App& app, WorkerArgs& args);

// `kiln workers FLEET [--json]`: the live workers of a shared store.
struct WorkersArgs {
    std::string fleet;
    bool as_json = false;
};
CLI::App* add_workers_command(CLI::App& app, WorkersArgs& args);
// Prints the workers (text table or JSON); exit code.
int print_workers(const std::string& fleet_name, const std::vector<journal::WorkerRow>& workers, bool as_json,
                  std::FILE* out);

// The labels as the worker was given them, for the workers table.
std::string labels_text(const std::vector<std::string>& labels);

// "rack=r1" -> {rack: r1}; a malformed or repeated key is an error.
Result<std::map<std::string, std::string>> parse_labels(const std::vector<std::string>& labels);

// A node serves a label when its [nodes.labels] has it; `rack` also matches
// the node's rack, so `--label rack=r1` needs no extra config.
bool node_has_labels(const config::Node& node, const std::map<std::string, std::string>& labels);

// The run options a worker passes to the engine: the nodes it serves, its
// lease timings. Errors name the bad flag; nothing is touched before.
Result<engine::RunOptions> worker_run_options(const WorkerArgs& args, const config::Fleet& fleet);

}  // namespace kiln::cli
