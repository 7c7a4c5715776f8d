#include "network/stage/network_stage.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "network/fabric.h"
#include "network/host/host_runner.h"
#include "network/host/host_scope.h"
#include "network/host/nic_firmware.h"
#include "network/stage/network_inputs.h"
#include "network/switch_drivers.h"
#include "network/switch_scope.h"

namespace kiln::network {

namespace {

using nlohmann::json;

const std::string kActionPrefix = "configure:";
const std::string kHostActionPrefix = "host-nics:";
const std::string kFirmwareActionPrefix = "host-firmware:";

// kiln reboots a host only over SSH: a `local` host is the machine kiln runs
// on, and a `netns` host is a rehearsal namespace of this machine.
bool can_reboot(const config::Node& node) {
    return node.host.mode == "ssh";
}

std::string summary(const std::vector<ConfigChange>& changes) {
    std::string out;
    for (size_t i = 0; i < changes.size() && i < 3; ++i) out += (i ? "; " : "") + changes[i].describe();
    if (changes.size() > 3) out += fmt::format("; and {} more", changes.size() - 3);
    return out;
}

// Shared changes another node of the plan lists in full (NetworkStage::observe).
struct ListedElsewhere {
    size_t count = 0;
    std::set<std::string> flaps;  // ports they take down and up
};

// The node's position in fleet.nodes (a context's node is one of them).
size_t node_index(const config::Fleet& fleet, const config::Node& node) {
    if (!fleet.nodes.empty() && &node >= fleet.nodes.data() && &node < fleet.nodes.data() + fleet.nodes.size())
        return static_cast<size_t>(&node - fleet.nodes.data());
    for (size_t k = 0; k < fleet.nodes.size(); ++k)
        if (fleet.nodes[k].name == node.name) return k;
    return fleet.nodes.size();
}

std::string first_lines(const std::vector<std::string>& lines, size_t max = 3) {
    std::string out;
    for (size_t i = 0; i < lines.size() && i < max; ++i) out += (i ? "; " : "") + lines[i];
    if (lines.size() > max) out += fmt::format("; and {} more", lines.size() - max);
    return out;
}

}  // namespace

// What the nodes of one plan or run share: the fabric, each switch's profile,
// and each switch's last read (its state, and its whole comparison).
struct NetworkStage::RunCache {
    // Changes several nodes share and the leaves whose nodes share them.
    struct SharedGroup {
        std::vector<size_t> ks;  // into SwitchRead::changes
        std::vector<size_t> leaves;
        std::optional<size_t> owner;  // shared_owner, resolved by the first sharer
    };
    // A set of leaves' shared changes on one switch, under the node that
    // lists them in full (shared_owner): all of them, and the ports they
    // take down and up.
    struct OwnedShare {
        size_t owner = 0;
        std::vector<size_t> ks;
        std::set<std::string> flaps;
    };
    struct SwitchRead {
        std::mutex mu;              // held across the read, so one node reads and the others wait for it
        std::optional<json> state;  // read_state(); empty: not read, or dropped
        std::optional<std::vector<ConfigChange>> changes;  // every cabled port, from `state`
        // Indexes into `changes`: by the node whose port it is, and the
        // groups several nodes share, so a node's share costs its own.
        std::unordered_map<std::string, std::vector<size_t>> by_node;
        // "all": switch-wide (no port, or one nothing is cabled to) and,
        // above the leaves, the core links (no node at either end); every
        // node whose scope holds the switch shares it.
        SharedGroup all;
        // Uplink ports by the switch at their other end: the nodes of both ends share them.
        std::map<size_t, SharedGroup> up;
        // What the nodes of one set of leaves share here, by owner: resolved
        // by the first of them, taken as is by the others.
        std::map<std::vector<size_t>, std::vector<OwnedShare>> by_leaves;
        void forget() {
            changes.reset();
            by_node.clear();
            all = {};
            up.clear();
            by_leaves.clear();
        }
    };

    RunCache(const config::Fleet& f, AtomicCounters& c) : fleet(f), counters(c) {}

    // Built on first use: a run whose pipelines lack the network stage pays nothing.
    Status build() {
        std::call_once(built, [&] {
            auto f = build_fabric(fleet);
            if (!f) {
                fabric_error = f.error();
                return;
            }
            fabric = std::move(*f);
            for (const auto& fs : fabric.switches) {
                profiles.push_back(profile_for_switch(fleet, fabric, fs));
                std::unordered_map<std::string, std::string> owners;
                std::unordered_map<std::string, std::string> far_ends;
                std::set<std::string> core_ports;
                for (const auto& p : fs.ports) {
                    if (p.peer) owners.emplace(p.name, p.peer->node);
                    if (p.uplink && !p.uplink->core) far_ends.emplace(p.name, p.uplink->switch_name);
                    if (p.uplink && p.uplink->core) core_ports.insert(p.name);
                }
                port_owner.push_back(std::move(owners));
                uplink_far.push_back(std::move(far_ends));
                core_ports_of.push_back(std::move(core_ports));
                reads.push_back(std::make_unique<SwitchRead>());
            }
            index_sharers();
        });
        if (fabric_error) return *fabric_error;
        return ok_status();
    }
    // NetworkStage::input_text: network_inputs(fleet, node).dump(),
    // byte for byte, with what nodes share (each uplink of their leaves, far
    // switch, rack, profile) serialised once per run, not once per node.
    std::string input_text(const config::Node& node) {
        std::lock_guard<std::mutex> lock(text_mu);
        const size_t before = text_memo.uplinks_serialised;
        std::string text = network_inputs_text(fleet, node, text_memo);
        counters.uplinks_serialised += text_memo.uplinks_serialised - before;
        return text;
    }

    SwitchProfileFn profile_fn() const {
        return [this](size_t i) { return profiles.at(i); };
    }
    size_t index_of(const std::string& switch_name) const {
        return static_cast<size_t>(fabric.find_switch(switch_name) - fabric.switches.data());
    }
    // A newer read of switch i (apply's own), in place of the one kept.
    void refresh(size_t i, const json& state) {
        std::lock_guard<std::mutex> lock(reads[i]->mu);
        reads[i]->state = state;
        reads[i]->forget();
    }
    // After an apply: the next reader of this switch reads it again.
    void drop(size_t i) {
        std::lock_guard<std::mutex> lock(reads[i]->mu);
        reads[i]->state.reset();
        reads[i]->forget();
    }

    // Which nodes share a group of switch i's changes, by their leaves:
    // nodes_of_leaf[l] are the nodes cabled to switch l, in fleet order, and
    // reach[i] the leaves whose nodes' scope includes switch i (itself if a
    // leaf, every leaf with an uplink to it, and for a switch above the
    // leaves every leaf with an uplink into its core-linked group, as
    // scopes_for_node walks them).
    void index_sharers() {
        const size_t n = fabric.switches.size();
        nodes_of_leaf.assign(n, {});
        for (size_t k = 0; k < fleet.nodes.size(); ++k)
            for (const PortRef& ref : fabric.ports_of(fleet.nodes[k].name))
                if (nodes_of_leaf[ref.sw].empty() || nodes_of_leaf[ref.sw].back() != k)
                    nodes_of_leaf[ref.sw].push_back(k);
        // Switches above the leaves joined by core links share one reach.
        std::vector<size_t> group(n);
        for (size_t i = 0; i < n; ++i) group[i] = i;
        auto root = [&](size_t i) {
            while (group[i] != i) i = group[i] = group[group[i]];
            return i;
        };
        for (size_t i = 0; i < n; ++i)
            for (const PortRef& up : fabric.uplinks_of(i)) {
                size_t far = 0;
                const Port& port = fabric.switches[i].ports[up.port];
                if (port.uplink->core && fabric.facing(port, &far)) group[root(i)] = root(far);
            }
        std::vector<std::set<size_t>> reach_of(n);
        for (size_t l = 0; l < n; ++l) {
            if (!fabric.switches[l].leaf) continue;
            reach_of[l].insert(l);
            for (const PortRef& up : fabric.uplinks_of(l)) {
                size_t far = 0;
                if (!fabric.facing(fabric.switches[l].ports[up.port], &far)) continue;
                reach_of[fabric.switches[far].leaf ? far : root(far)].insert(l);
            }
        }
        reach.assign(n, {});
        for (size_t i = 0; i < n; ++i) {
            const auto& from = reach_of[fabric.switches[i].leaf ? i : root(i)];
            reach[i].assign(from.begin(), from.end());
        }
    }

    // The node that lists a group of shared changes in full: of the nodes
    // cabled to `leaves`, the first in fleet order that this plan or run
    // still has pending (the observing node `self` always is), so a plan of
    // the whole fleet lists each shared change once and a plan of one node
    // lists it under that node. Its sharers carry a count and its name.
    size_t shared_owner(const std::vector<size_t>& leaves, size_t self, const engine::StageContext& ctx) const {
        size_t best = self;
        for (size_t l : leaves)
            for (size_t k : nodes_of_leaf[l]) {
                if (k >= best) break;
                if (ctx.node_pending(fleet.nodes[k].name)) {
                    best = k;
                    break;
                }
            }
        return best;
    }

    // The groups of switch i's changes that nodes on `leaves` share (the
    // switch-wide ones; the uplinks with one end on their leaves), each
    // resolved to its owner once (shared_owner) and gathered by owner.
    // Called under entry.mu, once per set of leaves per read.
    std::vector<OwnedShare> shares_of(SwitchRead& entry, size_t i, const std::vector<size_t>& leaves, size_t self,
                                      const engine::StageContext& ctx) {
        ++counters.shared_resolved;
        std::map<size_t, OwnedShare> by_owner;
        auto take = [&](SharedGroup& g) {
            if (g.ks.empty()) return;
            if (!g.owner) g.owner = shared_owner(g.leaves, self, ctx);
            OwnedShare& share = by_owner[*g.owner];
            share.owner = *g.owner;
            share.ks.insert(share.ks.end(), g.ks.begin(), g.ks.end());
            for (size_t k : g.ks)
                if ((*entry.changes)[k].disruptive) share.flaps.insert((*entry.changes)[k].port);
        };
        take(entry.all);
        if (std::binary_search(leaves.begin(), leaves.end(), i)) {
            for (auto& [far, g] : entry.up) take(g);
        } else {
            for (size_t l : leaves)
                if (auto g = entry.up.find(l); g != entry.up.end()) take(g->second);
        }
        std::vector<OwnedShare> out;
        for (auto& [owner, share] : by_owner) out.push_back(std::move(share));
        return out;
    }

    // The part of a node's scope its leaves decide (scope_beyond_own_ports),
    // each switch with its fleet entry, its profile checked: walked once per
    // set of leaves, shared by all their nodes.
    struct CrossedSwitch {
        size_t sw = 0;
        const config::Switch* fleet_sw = nullptr;
        std::vector<size_t> ports;
    };
    using CrossedSwitches = Result<std::vector<CrossedSwitch>>;
    std::shared_ptr<const CrossedSwitches> crossed_by(const std::vector<size_t>& leaves) {
        {
            std::lock_guard<std::mutex> lock(crossed_mu);
            if (auto it = crossed.find(leaves); it != crossed.end()) return it->second;
        }
        auto walked = std::make_shared<CrossedSwitches>(walk_beyond(leaves));
        std::lock_guard<std::mutex> lock(crossed_mu);
        return crossed.try_emplace(leaves, std::move(walked)).first->second;
    }
    CrossedSwitches walk_beyond(const std::vector<size_t>& leaves) const {
        auto beyond = scope_beyond_own_ports(fabric, leaves);
        if (!beyond) return beyond.error();
        std::vector<CrossedSwitch> out;
        out.reserve(beyond->size());
        for (auto& [sw, ports] : *beyond) {
            const config::Switch* fleet_sw = fleet_switch(fleet, fabric, sw);
            if (fleet_sw == nullptr)
                return make_error("network", "network.unknown_switch",
                                  fmt::format("switch {} is not in the fleet", fabric.switches[sw].name));
            // One profile for all the switch's nodes (scopes_for_node's rule).
            if (!profiles.at(sw)) return profiles[sw].error();
            out.push_back({sw, fleet_sw, std::move(ports)});
        }
        return out;
    }

    const config::Fleet& fleet;
    AtomicCounters& counters;
    std::mutex crossed_mu;
    std::map<std::vector<size_t>, std::shared_ptr<const CrossedSwitches>> crossed;  // by set of leaves  // the stage's
    std::mutex text_mu;
    NetworkTextMemo text_memo;  // input_text's
    std::once_flag built;
    std::optional<Error> fabric_error;
    Fabric fabric;
    std::vector<Result<const network::RoceProfile*>> profiles;             // by fabric switch
    std::vector<std::unordered_map<std::string, std::string>> port_owner;  // cabled port -> node
    std::vector<std::unordered_map<std::string, std::string>> uplink_far;  // leaf uplink port -> the switch it faces
    std::vector<std::set<std::string>> core_ports_of;                      // ports on core links
    std::vector<std::unique_ptr<SwitchRead>> reads;
    std::vector<std::vector<size_t>> nodes_of_leaf;  // by switch: fleet.nodes indexes
    std::vector<std::vector<size_t>> reach;          // by switch: leaves whose nodes' scope includes it
};

NetworkStage::Counters NetworkStage::counters() const {
    return {counters_->shared_resolved.load(), counters_->uplinks_serialised.load()};
}

NetworkStage::NetworkStage(DriverFactory factory, HostRunnerFactory hosts)
    : factory_(std::move(factory)), hosts_(std::move(hosts)), counters_(std::make_shared<AtomicCounters>()) {
    if (!hosts_) hosts_ = [](const config::Node& node) { return host::make_host_runner(node); };
    if (!factory_) {
        // One HTTP client for every switch: it keeps connections per thread.
        auto deps = std::make_shared<SwitchDriverDeps>();
        deps->http = std::make_shared<net::CurlHttpClient>();
        factory_ = [deps](const config::Fleet& fleet, const config::Switch& sw) {
            return make_switch_driver(fleet, sw, *deps);
        };
    }
}

void NetworkStage::begin_run(const config::Fleet& fleet) {
    std::lock_guard<std::mutex> lock(runs_mu_);
    auto& [holders, cache] = runs_[&fleet];
    if (holders++ == 0) cache = std::make_shared<RunCache>(fleet, *counters_);
}

void NetworkStage::end_run(const config::Fleet& fleet) {
    std::lock_guard<std::mutex> lock(runs_mu_);
    auto it = runs_.find(&fleet);
    if (it != runs_.end() && --it->second.first <= 0) runs_.erase(it);
}

std::shared_ptr<NetworkStage::RunCache> NetworkStage::run_cache(const config::Fleet& fleet) const {
    std::lock_guard<std::mutex> lock(runs_mu_);
    auto it = runs_.find(&fleet);
    return it == runs_.end() ? nullptr : it->second.second;
}

Result<NetworkStage::FabricView> NetworkStage::fabric_view(const config::Fleet& fleet) const {
    FabricView view;
    view.cache = run_cache(fleet);
    if (view.cache) {
        if (auto s = view.cache->build(); !s) return s.error();
        return view;
    }
    auto fabric = build_fabric(fleet);
    if (!fabric) return fabric.error();
    view.own = std::move(*fabric);
    return view;
}

const Fabric& NetworkStage::FabricView::fabric() const {
    return cache ? cache->fabric : *own;
}

SwitchProfileFn NetworkStage::FabricView::profiles() const {
    return cache ? cache->profile_fn() : SwitchProfileFn{};
}

std::vector<std::string> NetworkStage::resources(const config::Fleet& fleet, const config::Node& node) const {
    // The node's leaves only. Spines and super-spines carry every node's
    // traffic: holding them for a node's whole stage would run the fabric's
    // nodes one at a time. apply changes them under an exclusive hold,
    // kept only for that switch's read, diff and write (hold_exclusive).
    std::set<std::string> names;
    for (const config::Cable* c : fleet.cables_of(node.name)) names.insert(c->switch_name);
    std::vector<std::string> out;
    for (const auto& n : names) out.push_back("switch:" + n);
    return out;
}

Result<nlohmann::json> NetworkStage::inputs(const engine::StageContext& ctx) const {
    return network_inputs(ctx.fleet(), ctx.node());
}

Result<std::string> NetworkStage::input_text(const engine::StageContext& ctx) const {
    auto cache = run_cache(ctx.fleet());
    if (!cache) return Stage::input_text(ctx);
    return cache->input_text(ctx.node());
}

Result<engine::Observation> NetworkStage::observe(engine::StageContext& ctx) {
    auto view = fabric_view(ctx.fleet());
    if (!view) return view.error();
    const auto& cache = view->cache;
    const Fabric& fabric = view->fabric();
    const config::Node& node = ctx.node();
    // The switches the node is cabled to (fabric indexes, ascending): it shares their uplinks' changes.
    const std::vector<PortRef>& own_ports = fabric.ports_of(node.name);
    std::vector<size_t> leaves;
    for (const PortRef& ref : own_ports) leaves.push_back(ref.sw);
    std::sort(leaves.begin(), leaves.end());
    leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
    const size_t self = node_index(ctx.fleet(), node);
    // The switches the node's traffic crosses, with its ports on each. In a
    // run the part its leaves decide is walked once per set of leaves
    // (RunCache::crossed_by) and the node adds its own ports; outside a run
    // scopes_for_node walks it all for this node.
    struct Crossed {
        size_t index = 0;  // in the fabric
        const config::Switch* sw = nullptr;
        const std::vector<size_t>* ports = nullptr;  // port indexes
        std::vector<size_t> with_own;                // a leaf's: the shared ones and the node's own
        const SwitchScope* scope = nullptr;          // outside a run
    };
    std::vector<SwitchScope> scopes;
    std::vector<Crossed> crossed;
    if (cache) {
        auto has = node_has_scope(ctx.fleet(), node);
        if (!has) return has.error();
        if (*has) {
            auto beyond = cache->crossed_by(leaves);
            if (!*beyond) return beyond->error();
            crossed.reserve((*beyond)->size());
            for (const auto& c : **beyond) {
                Crossed x{c.sw, c.fleet_sw, &c.ports, {}, nullptr};
                if (std::binary_search(leaves.begin(), leaves.end(), c.sw)) {
                    x.with_own = c.ports;
                    for (const PortRef& ref : own_ports)
                        if (ref.sw == c.sw) x.with_own.push_back(ref.port);
                    std::sort(x.with_own.begin(), x.with_own.end());
                    x.with_own.erase(std::unique(x.with_own.begin(), x.with_own.end()), x.with_own.end());
                    x.ports = nullptr;
                }
                crossed.push_back(std::move(x));
            }
        }
    } else {
        auto walked = scopes_for_node(ctx.fleet(), fabric, node, view->profiles());
        if (!walked) return walked.error();
        scopes = std::move(*walked);
        for (const auto& s : scopes) crossed.push_back({0, s.sw, nullptr, {}, &s});
    }
    engine::Observation obs;
    json switches = json::array();
    for (const Crossed& x : crossed) {
        if (ctx.should_stop()) return make_error("network", "network.stopped", "stopped while reading switches");
        json changes = json::array();
        std::map<size_t, ListedElsewhere> listed_elsewhere;  // by the node listing them
        if (cache) {
            // The whole switch, compared once for all its nodes; this node
            // takes the changes on its own ports, on its leaves' uplinks,
            // the core links above and the switch-wide ones.
            const size_t i = x.index;
            auto& entry = *cache->reads[i];
            std::lock_guard<std::mutex> lock(entry.mu);
            if (!entry.changes) {
                auto driver = factory_(ctx.fleet(), *x.sw);
                if (!driver) return driver.error();
                if (!entry.state) {
                    ctx.progress(fmt::format("reading {}", x.sw->name));
                    auto state = (*driver)->read_state();
                    if (!state) return state.error();
                    entry.state = std::move(*state);
                }
                auto whole = scope_for_switch(ctx.fleet(), fabric, *x.sw);
                if (!whole) return whole.error();
                auto cmp = compare_switch(**driver, *whole, *entry.state);
                if (!cmp) return cmp.error();
                entry.forget();
                entry.changes = std::move(cmp->changes);
                const auto& owner = cache->port_owner[i];
                const auto& far = cache->uplink_far[i];
                const auto& core = cache->core_ports_of[i];
                for (size_t k = 0; k < entry.changes->size(); ++k) {
                    const std::string& port = (*entry.changes)[k].port;
                    if (auto o = owner.find(port); o != owner.end()) {
                        entry.by_node[o->second].push_back(k);
                    } else if (auto f = far.find(port); f != far.end()) {
                        // An uplink: the nodes of the switches at both ends share it.
                        const size_t f_index = cache->index_of(f->second);
                        auto& group = entry.up[f_index];
                        group.ks.push_back(k);
                        group.leaves = {i, f_index};
                    } else if (core.count(port)) {
                        // Above its leaves a node's traffic crosses every core link in its scope.
                        if (!fabric.switches[i].leaf) entry.all.ks.push_back(k);
                    } else {
                        entry.all.ks.push_back(k);
                    }
                }
                std::sort(entry.all.ks.begin(), entry.all.ks.end());
                entry.all.leaves = cache->reach[i];
            }
            // The node's own changes, and the groups it shares with other
            // nodes: listed in full under one of them (shared_owner), as a
            // count under the others, so a plan of thousands of nodes holds
            // each shared change once. apply re-reads and re-diffs the whole
            // scope, so whichever sharer applies first does the group's work.
            // Which groups a node shares depends only on its leaves: the
            // first node of each set of leaves resolves them, the others
            // take that (a node's cost is its own changes, not its leaves').
            std::vector<size_t> mine;
            if (auto o = entry.by_node.find(node.name); o != entry.by_node.end()) mine = o->second;
            auto [shares, fresh] = entry.by_leaves.try_emplace(leaves);
            if (fresh) shares->second = cache->shares_of(entry, i, leaves, self, ctx);
            for (const auto& share : shares->second) {
                if (share.owner == self) {
                    mine.insert(mine.end(), share.ks.begin(), share.ks.end());
                    continue;
                }
                auto& elsewhere = listed_elsewhere[share.owner];
                elsewhere.count += share.ks.size();
                elsewhere.flaps.insert(share.flaps.begin(), share.flaps.end());
            }
            // In the whole comparison's order, as the node's own diff lists them.
            std::sort(mine.begin(), mine.end());
            mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
            for (size_t k : mine) changes.push_back(change_json(x.sw->name, (*entry.changes)[k]));
        } else {
            ctx.progress(fmt::format("reading {}", x.sw->name));
            auto driver = factory_(ctx.fleet(), *x.sw);
            if (!driver) return driver.error();
            auto cmp = compare_switch(**driver, *x.scope);
            if (!cmp) return cmp.error();
            for (const auto& c : cmp->changes) changes.push_back(change_json(x.sw->name, c));
        }
        json ports = json::array();
        if (x.scope) {
            for (const auto& p : x.scope->ports) ports.push_back(p.name);
        } else {
            for (size_t p : x.ports ? *x.ports : x.with_own) ports.push_back(fabric.switches[x.index].ports[p].name);
        }
        json entry = {
            {"switch", x.sw->name}, {"os", x.sw->os}, {"ports", std::move(ports)}, {"changes", std::move(changes)}};
        if (!listed_elsewhere.empty()) {
            json shared = json::array();
            for (const auto& [owner, what] : listed_elsewhere)
                shared.push_back(
                    {{"listed_under", ctx.fleet().nodes[owner].name}, {"changes", what.count}, {"flaps", what.flaps}});
            entry["shared"] = std::move(shared);
        }
        switches.push_back(std::move(entry));
    }
    obs.state["switches"] = std::move(switches);

    auto hs = host::host_scope_for_node(ctx.fleet(), node);
    if (!hs.managed) {
        obs.state["host_nics"] = host::host_not_managed_json(hs.why_not);
        return obs;
    }
    if (ctx.should_stop()) return make_error("network", "network.stopped", "stopped before reading host NICs");
    ctx.progress(fmt::format("reading host NICs ({})", node.host.describe()));
    auto runner = hosts_(node);
    if (!runner) return runner.error();
    auto nics = host::reconcile_host_nics(**runner, node, hs, false);
    if (!nics) return nics.error();
    obs.state["host_nics"] = host::host_nics_json(node, *nics);
    if (hs.nics.empty())
        obs.notes.push_back("host NICs: the node lists no nics, so there is nothing to set on its host");
    const auto findings = host::host_nic_findings(obs.state["host_nics"]);
    for (const auto& w : findings.warnings) obs.notes.push_back("host NIC " + w);
    if (!can_reboot(node))
        for (size_t i = 0; i < findings.firmware.size(); ++i)
            obs.notes.push_back(
                fmt::format("host NIC firmware {}: kiln reboots hosts only over SSH (host is {}), so do it by hand: {}",
                            findings.firmware[i], node.host.describe(), findings.firmware_plans[i]));
    return obs;
}

Result<std::vector<engine::Action>> NetworkStage::plan(engine::StageContext& ctx, const engine::Observation& observed) {
    std::vector<engine::Action> actions;
    // By reference: a node's observation lists every switch its traffic crosses.
    static const json kNone = json::array();
    const auto found = observed.state.find("switches");
    for (const auto& s : found == observed.state.end() ? kNone : *found) {
        const auto& changes = s["changes"];
        const auto at = s.find("shared");
        const json& shared = at == s.end() ? kNone : *at;
        if (changes.empty() && shared.empty()) continue;
        // Ports the switch takes down and up to make the change: their links drop.
        std::set<std::string> flaps;
        for (const auto& c : changes)
            if (c.value("disruptive", false)) flaps.insert(c["port"].get<std::string>());
        size_t count = changes.size();
        std::vector<std::string> elsewhere;
        for (const auto& g : shared) {
            count += g["changes"].get<size_t>();
            for (const auto& p : g["flaps"]) flaps.insert(p.get<std::string>());
            elsewhere.push_back(
                fmt::format("{} listed under {}", g["changes"].get<size_t>(), g["listed_under"].get<std::string>()));
        }
        std::string desc = fmt::format("configure {} ({}): {} change{}", s["switch"].get<std::string>(),
                                       s["os"].get<std::string>(), count, count == 1 ? "" : "s");
        for (size_t i = 0; i < changes.size() && i < 3; ++i)
            desc += (i ? "; " : ": ") + changes[i]["text"].get<std::string>();
        if (changes.size() > 3) desc += fmt::format("; and {} more", changes.size() - 3);
        // Changes this node shares with others (uplinks, switch-wide) are
        // listed once, under the first of them in this plan.
        if (!elsewhere.empty())
            desc += fmt::format("{}shared: {}", changes.empty() ? ": " : "; ", fmt::join(elsewhere, ", "));
        if (!flaps.empty())
            desc +=
                fmt::format(" (takes port{} down and up: {})", flaps.size() == 1 ? "" : "s", fmt::join(flaps, ", "));
        json detail = {{"switch", s["switch"]}, {"os", s["os"]}, {"changes", changes}, {"flaps", flaps}};
        if (!shared.empty()) detail["shared"] = shared;
        actions.push_back({kActionPrefix + s["switch"].get<std::string>(), desc, std::move(detail)});
    }
    // Host NICs after the switches: the ports are lossless before the host tags traffic.
    const json host_nics = observed.state.value("host_nics", json::object());
    auto findings = host::host_nic_findings(host_nics);
    const std::string& node = ctx.node().name;
    if (!can_reboot(ctx.node()))
        findings.blocking.insert(findings.blocking.end(), findings.firmware_blocking.begin(),
                                 findings.firmware_blocking.end());
    if (!findings.blocking.empty())
        return make_error("network", "network.host_nic_required",
                          fmt::format("node {}: {}", node, first_lines(findings.blocking, 8)));
    // ConnectX firmware before the runtime settings: the reboot it needs
    // resets those, so host-nics follows it and sets what the reboot undid.
    const bool firmware = !findings.firmware.empty() && can_reboot(ctx.node());
    if (firmware)
        actions.push_back({kFirmwareActionPrefix + node,
                           fmt::format("set ConnectX firmware on {}: {}; then reboot the host once", node,
                                       fmt::join(findings.firmware, "; ")),
                           {{"host", host_nics["host"]}, {"nics", findings.firmware}}});
    if (findings.work.empty() && firmware)
        actions.push_back({kHostActionPrefix + node,
                           fmt::format("set host NICs of {} ({}) after the reboot: read them again and set what "
                                       "differs",
                                       node, host_nics.value("host", "")),
                           {{"host", host_nics["host"]}, {"items", json::array()}}});
    if (!findings.work.empty()) {
        std::string desc =
            fmt::format("set host NICs of {} ({}): {} change{}: {}", node, host_nics.value("host", ""),
                        findings.work.size(), findings.work.size() == 1 ? "" : "s", first_lines(findings.work));
        const int unsupported = host_nics.value("counts", json::object()).value("unsupported", 0);
        if (unsupported)
            desc += fmt::format(" ({} unsupported setting{} left as is)", unsupported, unsupported == 1 ? "" : "s");
        actions.push_back({kHostActionPrefix + node, desc, {{"host", host_nics["host"]}, {"items", findings.work}}});
    }
    return actions;
}

Status NetworkStage::apply_firmware(engine::StageContext& ctx) {
    const config::Node& node = ctx.node();
    auto hs = host::host_scope_for_node(ctx.fleet(), node);
    if (!hs.managed) return make_error("network", "network.host_not_managed", hs.why_not);
    if (!can_reboot(node))
        return make_error("network", "network.host_reboot_unsupported",
                          fmt::format("node {}: kiln reboots a host for its NIC firmware only over SSH (host is {})",
                                      node.name, node.host.describe()));
    std::vector<host::FirmwareNic> nics;
    for (const auto& t : hs.nics)
        if (t.want.firmware) nics.push_back({t.nic, t.want.ifname, *t.want.firmware});
    if (nics.empty()) return ok_status();
    auto runner = hosts_(node);
    if (!runner) return runner.error();
    if (auto p = host::probe_host(**runner, node); !p) return p.error();

    using std::chrono::milliseconds;
    host::FirmwareApplyOptions o;
    o.command_timeout = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(node.host.timeout));
    o.reboot.command_timeout = o.command_timeout;
    o.reboot.timeout = std::chrono::duration_cast<milliseconds>(node.host.reboot_timeout);
    // Poll about twenty times over the wait, at most every 10s.
    o.reboot.poll_interval = std::clamp(o.reboot.timeout / 20, milliseconds(1), milliseconds(std::chrono::seconds(10)));
    o.reboot.wait = [&ctx](milliseconds d) { return ctx.wait_for(d); };
    o.reboot.progress = [&ctx](const std::string& m) { ctx.progress(m); };
    ctx.progress(fmt::format("setting ConnectX firmware ({})", node.host.describe()));
    auto done = host::apply_nic_firmware(**runner, nics, o);
    if (!done) {
        Error e = done.error();
        e.message = fmt::format("node {} ConnectX firmware: {}", node.name, e.message);
        return e;
    }
    for (const auto& line : done->set) ctx.progress("set " + line);
    return ok_status();
}

Status NetworkStage::apply_host(engine::StageContext& ctx) {
    const config::Node& node = ctx.node();
    auto hs = host::host_scope_for_node(ctx.fleet(), node);
    if (!hs.managed) return make_error("network", "network.host_not_managed", hs.why_not);
    auto runner = hosts_(node);
    if (!runner) return runner.error();
    ctx.progress(fmt::format("setting host NICs ({})", node.host.describe()));
    auto done = host::reconcile_host_nics(**runner, node, hs, true);
    if (!done) return done.error();
    for (const auto& r : *done)
        for (const auto& i : r.report.items)
            if (i.outcome == host::NicOutcome::Changed)
                ctx.progress(fmt::format("{}{} {}", r.nic, r.nic == r.report.ifname ? "" : " (" + r.report.ifname + ")",
                                         i.str()));
    // apply() leaves no drift: what is left as work here failed.
    const auto failed = host::host_nic_findings(host::host_nics_json(node, *done)).work;
    if (!failed.empty())
        return make_error("network", "network.host_nic_failed",
                          fmt::format("node {} host NICs: {}", node.name, first_lines(failed, 8)));
    return ok_status();
}

Status NetworkStage::verify_host(engine::StageContext& ctx) {
    const config::Node& node = ctx.node();
    auto hs = host::host_scope_for_node(ctx.fleet(), node);
    if (!hs.managed) return ok_status();
    auto runner = hosts_(node);
    if (!runner) return runner.error();
    auto seen = host::reconcile_host_nics(**runner, node, hs, false);
    if (!seen) return seen.error();
    auto findings = host::host_nic_findings(host::host_nics_json(node, *seen));
    if (!can_reboot(node))
        findings.blocking.insert(findings.blocking.end(), findings.firmware_blocking.begin(),
                                 findings.firmware_blocking.end());
    if (!findings.blocking.empty())
        return make_error("network", "network.host_nic_required",
                          fmt::format("node {}: {}", node.name, first_lines(findings.blocking, 8)));
    if (!findings.work.empty())
        return make_error(
            "network", "network.verify_failed",
            fmt::format("node {} host NICs still differ after apply: {}", node.name, first_lines(findings.work)));
    if (!findings.firmware.empty() && can_reboot(node))
        return make_error("network", "network.verify_failed",
                          fmt::format("node {} ConnectX firmware still differs after apply: {}", node.name,
                                      first_lines(findings.firmware)));
    return ok_status();
}

Status NetworkStage::apply(engine::StageContext& ctx, const engine::Action& action) {
    if (action.id == kHostActionPrefix + ctx.node().name) return apply_host(ctx);
    if (action.id == kFirmwareActionPrefix + ctx.node().name) return apply_firmware(ctx);
    if (action.id.rfind(kActionPrefix, 0) != 0)
        return make_error("network", "network.bad_action", "unknown network action " + action.id);
    const std::string name = action.id.substr(kActionPrefix.size());
    auto view = fabric_view(ctx.fleet());
    if (!view) return view.error();
    const auto& cache = view->cache;
    const Fabric& fabric = view->fabric();
    auto scopes = scopes_for_node(ctx.fleet(), fabric, ctx.node(), view->profiles());
    if (!scopes) return scopes.error();
    for (const auto& scope : *scopes) {
        if (scope.sw->name != name) continue;
        auto driver = factory_(ctx.fleet(), *scope.sw);
        if (!driver) return driver.error();
        // Read and diff again, never from the shared read: the switch may
        // have changed since the plan, or an earlier run may have done this
        // already. One change per switch at a time, whatever per_switch
        // lets through on the leaves and on the spines that every node
        // shares: in this process and across workers on a shared store.
        auto held = ctx.hold_exclusive("switch:" + name);
        if (!held) return held.error();
        auto state = (*driver)->read_state();
        if (!state) return state.error();
        if (cache) cache->refresh(cache->index_of(name), *state);  // the freshest read, for the readers after
        auto cmp = compare_switch(**driver, scope, *state);
        if (!cmp) return cmp.error();
        if (cmp->changes.empty()) return ok_status();
        ctx.progress(
            fmt::format("applying {} change{} to {}", cmp->changes.size(), cmp->changes.size() == 1 ? "" : "s", name));
        auto applied = (*driver)->apply(cmp->desired, cmp->running);
        // Applied or not (a failure may leave it half done), what was read is stale.
        if (cache) cache->drop(cache->index_of(name));
        return applied;
    }
    return make_error("network", "network.bad_action",
                      fmt::format("node {} does not reach switch {} (not cabled to it, nor on its leaves' uplinks or "
                                  "the core links above them)",
                                  ctx.node().name, name));
}

Status NetworkStage::verify(engine::StageContext& ctx) {
    auto view = fabric_view(ctx.fleet());
    if (!view) return view.error();
    const auto& cache = view->cache;
    const Fabric& fabric = view->fabric();
    auto scopes = scopes_for_node(ctx.fleet(), fabric, ctx.node(), view->profiles());
    if (!scopes) return scopes.error();
    for (const auto& scope : *scopes) {
        auto driver = factory_(ctx.fleet(), *scope.sw);
        if (!driver) return driver.error();
        Result<SwitchComparison> cmp = make_error("network", "network.unread", "not read");
        if (cache) {
            // The node's own keys (exactly, not the whole switch's) from the
            // shared read; an apply since has dropped it, so this reads anew.
            auto& entry = *cache->reads[cache->index_of(scope.sw->name)];
            std::lock_guard<std::mutex> lock(entry.mu);
            if (!entry.state) {
                auto state = (*driver)->read_state();
                if (!state) return state.error();
                entry.state = std::move(*state);
            }
            cmp = compare_switch(**driver, scope, *entry.state);
        } else {
            cmp = compare_switch(**driver, scope);
        }
        if (!cmp) return cmp.error();
        if (!cmp->changes.empty())
            return make_error(
                "network", "network.verify_failed",
                fmt::format("switch {} still differs after apply: {}", scope.sw->name, summary(cmp->changes)));
    }
    return verify_host(ctx);
}

}  // namespace kiln::network
