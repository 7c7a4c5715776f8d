#include "pipelines/smoke/stage/smoke_config.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

#include "provisioner/config/toml_reader.h"

namespace kiln::smoke {

namespace {

using config::Diagnostic;
using config::Fleet;
using config::Node;
using config::TableReader;

SmokeProfile read_smoke(const std::string& name, TableReader& r, config::TableScope&) {
    SmokeProfile p;
    p.name = name;
    p.pos = r.pos();
    const auto& ctx = r.ctx();
    if (auto v = r.duration("timeout")) p.timeout = *v;
    if (auto v = r.choice("scope", {"node", "rack", "fleet"})) {
        p.scope = *v;
        p.scope_pos = ctx.pos(r.table().get("scope")->source());
    }
    if (auto v = r.number("relative_floor")) {
        if (*v > 0 && *v < 1)
            p.relative_floor = *v;
        else
            ctx.error(r.table().get("relative_floor")->source(), r.key_path("relative_floor"),
                      "must be a fraction of the median between 0 and 1 (e.g. 0.9)");
    }
    if (auto v = r.choice("relative_verdict", {"warn", "fail"})) p.relative_verdict = *v;
    p.rdma_bytes = r.integer("rdma_bytes", 1, int64_t{1} << 30);
    p.rdma_iterations = r.integer("rdma_iterations", 5, 100000000);
    if (auto v = r.duration("rdma_pair_timeout")) {
        if (*v >= std::chrono::seconds(1))
            p.rdma_pair_timeout = *v;
        else
            ctx.error(r.table().get("rdma_pair_timeout")->source(), r.key_path("rdma_pair_timeout"),
                      "must be at least 1s: perftest sets up its connection within it");
    }
    if (const toml::table* th = r.table("thresholds")) {
        TableReader tr(ctx, *th, r.key_path("thresholds"));
        for (const auto& [k, v] : *th) {
            const std::string key(k.str());
            if (auto x = tr.number(key)) p.thresholds[key] = *x;
        }
        tr.finish();
    }
    return p;
}

// A shared smoke ring runs only when all its nodes sit in their smoke stage
// at once, and each node that arrives first waits there holding its slots
// (parallel, per_rack, max_unavailable). With every ring short of one node,
// the waiters must still leave a slot for a missing node: a limit needs sum
// over rings of (nodes - 1), plus one. Their VMs must also reach one another
// (port forwards on one hypervisor's loopback).
// Nodes whose pipeline has no smoke stage never join a ring.
bool runs_smoke(const Fleet& fleet, const Node& n) {
    auto pl = fleet.pipelines.find(n.role);
    return pl == fleet.pipelines.end() ||
           std::find(pl->second.stages.begin(), pl->second.stages.end(), "smoke") != pl->second.stages.end();
}

void check_rings(const Fleet& fleet, std::vector<Diagnostic>& errors) {
    struct Ring {
        const SmokeProfile* profile;
        std::vector<const Node*> nodes;
    };
    std::vector<Ring> rings;
    // A ring's members share it: each ring is looked up once, not once per
    // member (a fleet-scope ring of N nodes would cost N x N). Only nodes
    // that run the stage wait in a ring.
    std::unordered_set<const Node*> placed;
    for (const auto& n : fleet.nodes) {
        if (placed.count(&n) || !runs_smoke(fleet, n)) continue;
        const SmokeProfile* p = smoke_profile(fleet, n);
        if (!p || p->scope == "node") continue;
        auto ring = smoke_ring(fleet, n);
        placed.insert(ring.begin(), ring.end());
        if (ring.size() < 2) continue;
        rings.push_back({p, std::move(ring)});
    }
    if (rings.empty()) return;
    auto err = [&](const SmokeProfile& p, const std::string& msg) {
        errors.push_back({p.scope_pos, "smoke." + p.name + ".scope", msg});
    };
    auto uri = [](const Node& m) { return m.libvirt_uri.empty() ? std::string("qemu:///system") : m.libvirt_uri; };
    int need = 1, nodes = 0;
    std::map<std::string, int> rack_need;
    for (const auto& r : rings) {
        need += static_cast<int>(r.nodes.size()) - 1;
        nodes += static_cast<int>(r.nodes.size());
        std::map<std::string, int> in_rack;
        for (const Node* m : r.nodes) ++in_rack[m->rack];
        for (const auto& [rack, count] : in_rack) rack_need[rack] += count - 1;
        for (const Node* m : r.nodes)
            if (m->libvirt_uri != r.nodes.front()->libvirt_uri) {
                err(*r.profile,
                    fmt::format("the smoke ring of {} spans hypervisors ({} on '{}', {} on '{}'): its "
                                "VMs reach each other only through one hypervisor's loopback port "
                                "forwards",
                                r.profile->name, r.nodes.front()->name, uri(*r.nodes.front()), m->name, uri(*m)));
                break;
            }
    }
    const SmokeProfile& first = *rings.front().profile;
    const std::string what =
        fmt::format("{} shared smoke ring{} ({} nodes)", rings.size(), rings.size() == 1 ? "" : "s", nodes);
    const auto& l = fleet.limits;
    if (l.parallel < need)
        err(first, fmt::format("{} need [limits] parallel >= {} (nodes that reach the stage first wait there "
                               "for the rest), but parallel = {}",
                               what, need, l.parallel));
    if (l.max_unavailable > 0 && l.max_unavailable < need)
        err(first, fmt::format("{} need [limits] max_unavailable >= {} (or 0), but max_unavailable = {}", what, need,
                               l.max_unavailable));
    if (l.per_rack > 0)
        for (const auto& [rack, waiting] : rack_need)
            if (l.per_rack < waiting + 1)
                err(first, fmt::format("{} need [limits] per_rack >= {} for rack {}, but per_rack = {}", what,
                                       waiting + 1, rack, l.per_rack));
}

}  // namespace

config::ConfigTable smoke_table() {
    auto t = config::named_profiles_table<SmokeProfile>(kSmokeTable, kSmokeTable, read_smoke);
    t.group_nodes = true;  // smoke_ring asks for each node's ring
    t.check_fleet = check_rings;
    return t;
}

const config::Profiles<SmokeProfile>* smoke_profiles(const Fleet& fleet) {
    return fleet.table<config::Profiles<SmokeProfile>>(kSmokeTable);
}

const SmokeProfile* smoke_profile(const Fleet& fleet, const Node& node) {
    return fleet.picked<SmokeProfile>(kSmokeTable, node, kSmokeTable);
}

void add_smoke_profile(Fleet& fleet, SmokeProfile profile) {
    config::add_profile(fleet, kSmokeTable, std::move(profile));
    fleet.grouped_picks.insert(kSmokeTable);
}

SmokeProfile* mutable_smoke_profile(Fleet& fleet, const std::string& name) {
    return config::mutable_profile<SmokeProfile>(fleet, kSmokeTable, name);
}

const std::string& ring_scope(const Fleet& fleet, const Node& node) {
    static const std::string own = "node";
    const SmokeProfile* p = smoke_profile(fleet, node);
    return p ? p->scope : own;
}

std::vector<const Node*> smoke_ring(const Fleet& fleet, const Node& node) {
    const SmokeProfile* p = smoke_profile(fleet, node);
    if (!p || p->scope == "node") return {&node};
    const auto& nodes = fleet.nodes;
    const bool in_fleet = !nodes.empty() && &node >= nodes.data() && &node < nodes.data() + nodes.size();
    std::vector<const Node*> ring;
    bool placed = false;
    for (const Node* m : fleet.nodes_picking(kSmokeTable, p->name, p->scope == "rack" ? &node.rack : nullptr)) {
        // The node itself (or, for a copy of it, its place in the fleet)
        // rings with the others even when it runs no smoke.
        if (m == &node || (!in_fleet && m->name == node.name)) {
            ring.push_back(&node);
            placed = true;
            continue;
        }
        if (!placed && in_fleet && m > &node) {
            ring.push_back(&node);
            placed = true;
        }
        if (runs_smoke(fleet, *m)) ring.push_back(m);
    }
    if (!placed) ring.push_back(&node);
    return ring;
}

}  // namespace kiln::smoke
