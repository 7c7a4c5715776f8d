#include "pipelines/smoke/stage/smoke_stage.h"

#include <algorithm>
#include <functional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "pipelines/smoke/check_json.h"
#include "pipelines/smoke/fault_search.h"
#include "pipelines/smoke/relative_verdict.h"
#include "pipelines/smoke/smoke_record.h"
#include "pipelines/smoke/stage/smoke_config.h"
#include "provisioner/core/json_limits.h"
#include "provisioner/journal/store.h"

namespace kiln::smoke {

using nlohmann::json;

namespace {

// How often a node parked at a ring meeting looks again whether the nodes
// it waits for can still come (the engine says so without a wake-up).
constexpr std::chrono::milliseconds kRingRecheck{1000};

std::string tail(const std::string& s, size_t n) {
    std::string t = s.size() > n ? s.substr(s.size() - n) : s;
    std::replace(t.begin(), t.end(), '\n', ' ');
    return t;
}

// The JSON document is the last thing kiln-smoke prints: find its start.
std::optional<json> parse_report(const std::string& out) {
    const JsonLimits limits{16u << 20, 32, 1'000'000};
    if (auto j = parse_json_limited(out, "kiln-smoke's report", limits, "smoke")) return std::move(*j);
    auto brace = out.find("{\n");
    if (brace != std::string::npos)
        if (auto j = parse_json_limited(std::string_view(out).substr(brace), "kiln-smoke's report", limits, "smoke"))
            return std::move(*j);
    return std::nullopt;
}

}  // namespace

SmokeStage::SmokeStage(SmokeStageOptions options) : options_(std::move(options)) {}

Result<engine::Observation> SmokeStage::observe(engine::StageContext& ctx) {
    engine::Observation o;
    auto last = latest_smoke_result(ctx);
    if (!last) return last.error();
    if (!*last) {
        o.state = {{"last_result", nullptr}};
        return o;
    }
    o.state = {{"last_result", (*last)->verdict}, {"input_hash", (*last)->input_hash}, {"ts_ms", (*last)->ts_ms}};
    return o;
}

Result<std::vector<engine::Action>> SmokeStage::plan(engine::StageContext& ctx, const engine::Observation& observed) {
    const auto& s = observed.state;
    const bool passed =
        s.value("last_result", json(nullptr)) == "pass" && s.value("input_hash", "") == ctx.input_hash();
    if (passed && !ctx.reimage()) return std::vector<engine::Action>{};
    engine::Action a;
    a.id = "smoke:run";
    a.description = "run kiln-smoke in the VMs of " + ctx.node().name + " (" + options_.transport->name() + ")";
    return std::vector<engine::Action>{a};
}

namespace {

// This node's VM entries with the node named, as a ring's are.
json own_vms(const json& result) {
    json out = json::array();
    for (auto v : result["vms"]) {
        v["node"] = result.value("node", "");
        out.push_back(std::move(v));
    }
    return out;
}

// Every floor-type figure of the ring, by check: "node/vm" -> figure.
std::map<std::string, std::vector<Sample>> ring_figures(const json& ring) {
    std::map<std::string, std::vector<Sample>> out;
    for (const auto& v : ring) {
        if (!v.contains("report") || !v["report"].is_object()) continue;
        const std::string member = v.value("node", "") + "/" + v.value("vm", "");
        for (const auto& c : v["report"].value("checks", json::array()))
            if (c.value("compare", ">=") == ">=" && c.value("verdict", "") != "skip" && c.contains("figure") &&
                c["figure"].is_number())
                out[c.value("name", "")].push_back({member, c["figure"].get<double>()});
    }
    return out;
}

void judge_relative(json& result, const RelativePolicy& policy, const json& ring, json& failed) {
    const std::string node = result.value("node", "");
    json checks = json::object();
    json warnings = json::array();
    for (const auto& [name, samples] : ring_figures(ring)) {
        auto cmp = compare_with_median(samples, policy.floor);
        if (!cmp) {
            checks[name] = {{"n", samples.size()},
                            {"note", fmt::format("not compared: fewer than {} figures or no positive median",
                                                 kMinRelativeSamples)}};
            continue;
        }
        json members = json::array();
        for (const auto& st : cmp->standings) {
            members.push_back({{"member", st.member},
                               {"figure", st.figure},
                               {"fraction", st.fraction},
                               {"robust_z", st.robust_z ? json(*st.robust_z) : json(nullptr)},
                               {"below", st.below}});
            if (!st.below || st.member.rfind(node + "/", 0) != 0) continue;
            json entry = {{"vm", st.member.substr(node.size() + 1)},
                          {"name", name},
                          {"figure", st.figure},
                          {"threshold", policy.floor * cmp->spread.median},
                          {"compare", ">="},
                          {"relative", st.fraction},
                          {"detail", fmt::format("{:.2f} of the median {:.4g} over {} VMs (relative_floor {})",
                                                 st.fraction, cmp->spread.median, cmp->spread.n, policy.floor)}};
            (policy.fail ? failed : warnings).push_back(std::move(entry));
        }
        checks[name] = {
            {"n", cmp->spread.n}, {"median", cmp->spread.median}, {"mad", cmp->spread.mad}, {"members", members}};
    }
    result["relative"] = {{"floor", policy.floor}, {"verdict", policy.fail ? "fail" : "warn"}, {"checks", checks}};
    result["warnings"] = warnings;
}

// One VM of a ring, in rank order, with its fleet-wide ordinal
// (guest_contract.h): ordinals count every node's VMs, in the ring or not.
struct RingVm {
    std::string node, vm;
    int ordinal;
};

// What every rank of a run gets besides its place in the ring.
struct RankArgs {
    double connect_s = 60;
    double check_s = 20;
    std::map<std::string, double> thresholds;
    std::vector<std::string> extra;
    std::vector<std::string> profile;  // from the fleet's [smoke.NAME] (the RDMA writes' shape)
};

std::string peers_of(SmokeTransport& transport, const std::vector<RingVm>& ring) {
    std::string peers;
    for (size_t r = 0; r < ring.size(); ++r) {
        auto a = transport.address(ring[r].ordinal);
        peers += (r ? "," : "") + a.dial_host + ":" + std::to_string(a.dial_port);
    }
    return peers;
}

// The kiln-smoke launches of `node`'s VMs in `ring` (rank = place in ring);
// `rank_of[i]` is the rank of launch i.
std::vector<RankLaunch> ranks_of(SmokeTransport& transport, const std::string& node, const std::vector<RingVm>& ring,
                                 const RankArgs& args, std::vector<size_t>* rank_of) {
    const std::string peers = peers_of(transport, ring);
    std::vector<RankLaunch> ranks;
    for (size_t g = 0; g < ring.size(); ++g) {
        if (ring[g].node != node) continue;
        auto a = transport.address(ring[g].ordinal);
        const std::string& vm = ring[g].vm;
        RankLaunch r{vm,
                     {"--rank", std::to_string(g), "--peers", peers, "--listen-addr", a.listen_addr, "--listen-port",
                      std::to_string(a.listen_port), "--host", vm, "--connect-timeout",
                      std::to_string(std::max(1.0, args.connect_s)), "--check-timeout", std::to_string(args.check_s)}};
        for (const auto& e : args.extra) r.args.push_back(e);
        for (const auto& e : args.profile) r.args.push_back(e);
        // The fleet's thresholds last: they win over the extra arguments'
        // (kiln-smoke keeps the last one given), as they do when judged.
        for (const auto& [name, value] : args.thresholds) {
            r.args.push_back("--threshold");
            r.args.push_back(name + "=" + json(value).dump());
        }
        ranks.push_back(std::move(r));
        if (rank_of) rank_of->push_back(g);
    }
    return ranks;
}

// The checks a ring fails as a whole: one bad member fails them on every
// rank (the sum is wrong everywhere, the slowest link sets everyone's speed).
bool is_ring_check(const std::string& name) {
    return name.find("allreduce") != std::string::npos;
}

// Did any VM of the ring report a ring check failed?
bool ring_failed(const json& ring) {
    for (const auto& v : ring) {
        if (!v.contains("report") || !v["report"].is_object()) continue;
        for (const auto& c : v["report"].value("checks", json::array()))
            if (is_ring_check(c.value("name", "")) && c.value("verdict", "") == "fail") return true;
    }
    return false;
}

// One sub-ring's outcome from its ranks' reports: pass when every rank ran
// the ring checks and passed them all.
RingOutcome outcome_of(const std::vector<RankOutput>& outputs) {
    RingOutcome o;
    o.pass = !outputs.empty();
    double slowest = -1;
    for (const auto& out : outputs) {
        auto doc = out.timed_out ? std::nullopt : parse_report(out.out);
        if (!doc) {
            o.pass = false;
            if (o.detail.empty()) o.detail = out.vm + ": no report (exit " + std::to_string(out.exit_code) + ")";
            continue;
        }
        bool ran = false;
        for (const auto& c : doc->value("checks", json::array())) {
            const std::string name = c.value("name", "");
            if (!is_ring_check(name)) continue;
            ran = true;
            if (name.find("busbw") != std::string::npos && c.contains("figure") && c["figure"].is_number())
                slowest = slowest < 0 ? c["figure"].get<double>() : std::min(slowest, c["figure"].get<double>());
            if (c.value("verdict", "") != "pass") {
                o.pass = false;
                if (o.detail.empty()) o.detail = out.vm + ": " + name + " " + c.value("detail", "failed");
            }
        }
        if (!ran) {
            o.pass = false;
            if (o.detail.empty()) o.detail = out.vm + ": reported no all-reduce check";
        }
    }
    o.figure = std::max(0.0, slowest);
    return o;
}

json to_json(const SearchResult& r) {
    json runs = json::array();
    for (const auto& run : r.runs)
        runs.push_back({{"members", run.members},
                        {"pass", run.outcome.pass},
                        {"busbw_gbps", run.outcome.figure},
                        {"detail", run.outcome.detail}});
    json why = json::object();
    for (const auto& [m, w] : r.why) why[m] = w;
    return {{"suspects", r.suspects}, {"cleared", r.cleared}, {"why", why}, {"runs", runs}, {"complete", r.complete}};
}

// A VM that cannot RDMA-write to a peer is not at fault when the peer is:
// the peer's own fabric port is down, or no other member reached it either
// (two at least, with their own ports up, tried). Its rdma_unreachable_peers failure becomes a warning
// naming the peer; the peer keeps its own failures. With two members and a
// silent peer neither can be told apart from the other: both keep theirs.
// The rails of `report` a failed RDMA check concerns (those down, or those
// that missed a peer), named with the host NIC behind each where known:
// "; on the host, mlx5_1 is NIC 0000:4f:00.1". "" when none is known.
std::string host_nics_text(const json& report, bool down) {
    if (!report.contains("rdma") || !report["rdma"].is_object()) return "";
    const json& rdma = report["rdma"];
    auto rail_of = [](const json& j) -> long {
        return j.is_object() && j.contains("rail") && j["rail"].is_number_integer() ? j["rail"].get<long>() : -1;
    };
    std::set<long> concerned;
    if (!down)
        for (const auto& u : rdma.value("unreachable", json::array())) concerned.insert(rail_of(u));
    std::vector<std::string> named;
    for (const auto& r : rdma.value("rails", json::array())) {
        if (!r.is_object() || !r.contains("host_pci") || !r["host_pci"].is_string()) continue;
        const bool hit = down ? !r.value("active", true) : rail_of(r) >= 0 && concerned.count(rail_of(r)) > 0;
        if (hit) named.push_back(r.value("device", "rail") + " is NIC " + r["host_pci"].get<std::string>());
    }
    return named.empty() ? "" : fmt::format("; on the host, {}", fmt::join(named, ", "));
}

void excuse_rdma_peers(json& result, const json& ring, json& failed) {
    std::map<std::string, json> rdma;  // vm -> its report's "rdma"
    for (const auto& v : ring)
        if (v.contains("report") && v["report"].is_object() && v["report"].contains("rdma") &&
            v["report"]["rdma"].is_object())
            rdma[v.value("vm", "")] = v["report"]["rdma"];
    auto blamed = [&](const std::string& p) -> std::string {
        if (auto it = rdma.find(p); it != rdma.end() && !it->second.value("ports_down", json::array()).empty())
            return "its fabric port is down (" + it->second["ports_down"][0].get<std::string>() +
                   host_nics_text(json{{"rdma", it->second}}, true) + ")";
        // Only members whose own port is up say anything by missing it.
        int tried = 0, missed = 0;
        for (const auto& [vm, r] : rdma) {
            if (vm == p || !r.value("ports_down", json::array()).empty()) continue;
            ++tried;
            for (const auto& u : r.value("unreachable", json::array()))
                if (u.value("vm", "") == p) {
                    ++missed;
                    break;
                }
        }
        if (tried >= 2 && missed == tried) return fmt::format("none of the {} other members reached it", tried);
        return "";
    };
    json kept = json::array();
    json warnings = result.value("warnings", json::array());
    for (const auto& f : failed) {
        const std::string vm = f.value("vm", "");
        auto it = rdma.find(vm);
        if (f.value("name", "") != "rdma_unreachable_peers" || it == rdma.end() || !blamed(vm).empty()) {
            kept.push_back(f);
            continue;
        }
        std::set<std::string> peers;
        for (const auto& u : it->second.value("unreachable", json::array())) peers.insert(u.value("vm", ""));
        std::string why;
        for (const auto& p : peers) {
            const std::string b = blamed(p);
            if (b.empty()) {
                why.clear();
                break;
            }
            why += (why.empty() ? "" : "; ") + p + ": " + b;
        }
        if (peers.empty() || why.empty()) {
            kept.push_back(f);
            continue;
        }
        warnings.push_back({{"vm", vm},
                            {"name", "rdma_unreachable_peers"},
                            {"detail", "the fault is the peer's, not this VM's: " + why}});
    }
    failed = kept;
    if (!warnings.empty() || result.contains("warnings")) result["warnings"] = warnings;
}

// A node the localisation cleared drops the ring's failures (they were a
// peer's); a suspect keeps them and says what named it.
void apply_localisation(json& result, const json& localisation) {
    const std::string node = result.value("node", "");
    result["localisation"] = localisation;
    bool cleared = false;
    for (const auto& m : localisation.value("cleared", json::array())) cleared = cleared || m == node;
    json failed = json::array();
    for (const auto& f : result["failed"])
        if (!(cleared && is_ring_check(f.value("name", "")))) failed.push_back(f);
    if (!cleared)
        failed.push_back({{"vm", "*"},
                          {"name", "fault_localisation"},
                          {"detail", "a suspect of the failed ring: " +
                                         localisation.value("why", json::object()).value(node, "not cleared")}});
    result["failed"] = failed;
    result["verdict"] = failed.empty() ? "pass" : "fail";
}

}  // namespace

void trace_rails_to_host(json& vm_entry, const std::map<std::string, std::string>& host_to_guest) {
    if (!vm_entry.contains("report") || !vm_entry["report"].is_object()) return;
    json& report = vm_entry["report"];
    if (!report.contains("rdma") || !report["rdma"].is_object() || !report["rdma"].contains("rails") ||
        !report["rdma"]["rails"].is_array())
        return;
    std::map<std::string, std::string> host_of;
    for (const auto& [host, guest] : host_to_guest) host_of[guest] = host;
    for (auto& rail : report["rdma"]["rails"]) {
        if (!rail.is_object() || !rail.contains("pci") || !rail["pci"].is_string()) continue;
        if (auto it = host_of.find(rail["pci"].get<std::string>()); it != host_of.end()) rail["host_pci"] = it->second;
    }
}

void judge_result(json& result, const std::map<std::string, double>& thresholds, const RelativePolicy& relative,
                  const json& ring) {
    json failed = json::array();
    std::set<std::string> seen;
    for (const auto& vmr : result["vms"]) {
        const std::string vm = vmr.value("vm", "");
        if (!vmr.contains("report") || vmr["report"].is_null()) {
            failed.push_back({{"vm", vm}, {"name", "kiln-smoke"}, {"detail", vmr.value("error", "no report")}});
            continue;
        }
        for (const auto& c : vmr["report"]["checks"]) {
            const std::string name = c.value("name", "");
            seen.insert(name);
            std::string verdict = c.value("verdict", "fail");
            std::string detail = c.value("detail", "");
            json figure = c.value("figure", json(nullptr));
            json threshold = c.contains("threshold") ? c["threshold"] : json(nullptr);
            // The fleet's threshold is the one that counts, whatever the guest
            // used; a check it names must have measured something to hold
            // against it (a skip or a missing figure is not a pass).
            if (auto it = thresholds.find(name); it != thresholds.end()) {
                threshold = it->second;
                const bool measured = c.contains("figure") && c["figure"].is_number();
                if (verdict == "skip" || (verdict == "pass" && !measured)) {
                    detail = "did not measure, and the fleet sets a threshold for it" +
                             (detail.empty() ? std::string() : ": " + detail);
                    verdict = "fail";
                    figure = nullptr;  // a skip's 0 is no figure
                } else if (verdict == "pass") {
                    const double f = c["figure"].get<double>();
                    const bool ok = c.value("compare", ">=") == "<=" ? f <= it->second : f >= it->second;
                    if (!ok) verdict = "fail";
                }
            }
            if (verdict == "fail" && (name == "rdma_ports_down" || name == "rdma_unreachable_peers"))
                detail += host_nics_text(vmr["report"], name == "rdma_ports_down");
            if (verdict == "fail")
                failed.push_back({{"vm", vm},
                                  {"name", name},
                                  {"figure", figure},
                                  {"threshold", threshold},
                                  {"unit", c.value("unit", "")},
                                  {"compare", c.value("compare", ">=")},
                                  {"detail", detail}});
        }
    }
    // A threshold for a check no VM reported: an old kiln-smoke, a typo, a
    // check that silently vanished. Never pass on absence.
    for (const auto& [name, value] : thresholds)
        if (!seen.count(name))
            failed.push_back(
                {{"vm", "*"}, {"name", name}, {"threshold", value}, {"detail", "no VM reported this check"}});
    result.erase("relative");
    result.erase("warnings");
    if (relative.floor > 0) judge_relative(result, relative, ring.is_array() ? ring : own_vms(result), failed);
    excuse_rdma_peers(result, ring.is_array() ? ring : own_vms(result), failed);
    result["failed"] = failed;
    result["verdict"] = failed.empty() ? "pass" : "fail";
}

namespace {

// After a shared ring failed: which members make it fail? (fault_search.h)
// The suspects' VMs, each run alone beside a node the search cleared: a bad
// GPU or NIC sits in one VM, so where a node has several the one(s) that
// still fail name the part to pull. Adds "vms" to `localisation`
// ({node: {"beside", "runs", "suspects", "complete"}}) and the failing VMs
// to the node's "why". At most kMaxVmRuns runs, within `deadline`.
constexpr int kMaxVmRuns = 16;
// " (GPUs a, b; other functions c)" for a VM named bad, with its devices
// under entry["host_devices"][vm]; "" when they are not known.
std::string vm_devices_text(const SmokeStageOptions& options, const engine::StageContext& ctx,
                            const std::string& node_name, const std::string& vm, json& entry) {
    if (!options.vm_host_devices) return "";
    const config::Node* node = nullptr;
    for (const auto& n : ctx.fleet().nodes)
        if (n.name == node_name) node = &n;
    if (!node) return "";
    auto d = options.vm_host_devices(ctx.fleet(), *node, vm);
    if (!d) {
        entry["host_devices"][vm] = {{"error", d.error().message}};
        return "";
    }
    entry["host_devices"][vm] = {{"gpus", d->gpus}, {"others", d->others}};
    std::vector<std::string> parts;
    if (!d->gpus.empty())
        parts.push_back(fmt::format("GPU{} {}", d->gpus.size() == 1 ? "" : "s", fmt::join(d->gpus, ", ")));
    if (!d->others.empty()) parts.push_back(fmt::format("with {}", fmt::join(d->others, ", ")));
    return parts.empty() ? "" : fmt::format(" (host {})", fmt::join(parts, "; "));
}

void narrow_to_vms(const SmokeStageOptions& options, const engine::StageContext& ctx, json& localisation,
                   const SearchResult& found, const std::vector<RingVm>& ring_vms,
                   const std::function<RingOutcome(const std::vector<RingVm>&)>& run_vms,
                   std::chrono::steady_clock::time_point deadline) {
    if (found.cleared.empty()) return;
    const std::string& partner = found.cleared.front();
    std::vector<RingVm> beside;
    for (const auto& v : ring_vms)
        if (v.node == partner) beside.push_back(v);
    int runs = 0;
    json by_node = json::object();
    for (const auto& suspect : found.suspects) {
        std::vector<RingVm> own;
        for (const auto& v : ring_vms)
            if (v.node == suspect) own.push_back(v);
        if (own.size() < 2) continue;  // the node is the VM
        json entry = {{"beside", partner}, {"runs", json::array()}, {"suspects", json::array()}, {"complete", true}};
        for (const auto& v : own) {
            if (runs >= kMaxVmRuns || std::chrono::steady_clock::now() >= deadline) {
                entry["complete"] = false;
                break;
            }
            // Ring order as in the whole ring (by ordinal).
            std::vector<RingVm> sub = beside;
            sub.push_back(v);
            std::sort(sub.begin(), sub.end(), [](const RingVm& a, const RingVm& b) { return a.ordinal < b.ordinal; });
            RingOutcome o = run_vms(sub);
            ++runs;
            entry["runs"].push_back({{"vm", v.vm}, {"pass", o.pass}, {"busbw_gbps", o.figure}, {"detail", o.detail}});
            if (!o.pass) entry["suspects"].push_back(v.vm);
        }
        const size_t bad = entry["suspects"].size();
        if (entry["complete"].get<bool>() && bad > 0 && bad < own.size()) {
            std::vector<std::string> names;
            for (const auto& vm : entry["suspects"].get<std::vector<std::string>>())
                names.push_back(vm + vm_devices_text(options, ctx, suspect, vm, entry));
            localisation["why"][suspect] = localisation["why"].value(suspect, std::string("not cleared")) +
                                           fmt::format("; alone beside {} only {} fail{}: look there first", partner,
                                                       fmt::join(names, ", "), bad == 1 ? "s" : "");
        }
        by_node[suspect] = std::move(entry);
    }
    if (!by_node.empty()) localisation["vms"] = std::move(by_node);
}

// The ring's first node searches for the member(s) that make it fail; the
// others wait for its answer (their VMs take part in its sub-rings
// meanwhile). The search holds the leader's thread, and one thread per
// member while a sub-ring runs: one search per failed ring, not per node.
json search_ring_fault(const SmokeStageOptions& options, engine::StageContext& ctx, SmokeTransport& transport,
                       const std::vector<std::string>& met, const std::vector<RingVm>& ring_vms,
                       const RankArgs& rank_args, std::chrono::milliseconds timeout) {
    json mine = nullptr;
    {
        RankArgs sub_args = rank_args;
        sub_args.extra.push_back("--ring-only");
        // One all-reduce over `sub` (ring order), each node starting its own.
        auto run_vms = [&](const std::vector<RingVm>& sub) {
            std::vector<std::string> members;
            for (const auto& v : sub)
                if (std::find(members.begin(), members.end(), v.node) == members.end()) members.push_back(v.node);
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(ctx.deadline() -
                                                                                    engine::StageContext::Clock::now());
            const auto bound = std::max(std::chrono::milliseconds(1000), std::min(timeout, left));
            std::vector<Result<std::vector<RankOutput>>> outs(members.size(), std::vector<RankOutput>{});
            std::vector<std::thread> threads;
            for (size_t i = 0; i < members.size(); ++i)
                threads.emplace_back([&, i] {
                    const config::Node* node = nullptr;
                    for (const auto& n : ctx.fleet().nodes)
                        if (n.name == members[i]) node = &n;
                    if (!node) return;
                    outs[i] = transport.run(*node, ranks_of(transport, members[i], sub, sub_args, nullptr), bound);
                });
            for (auto& t : threads) t.join();
            std::vector<RankOutput> all;
            for (size_t i = 0; i < outs.size(); ++i) {
                if (!outs[i]) return RingOutcome{false, 0, members[i] + ": " + outs[i].error().message};
                for (auto& o : *outs[i]) all.push_back(std::move(o));
            }
            return outcome_of(all);
        };
        auto vms_of = [&](const std::vector<std::string>& nodes) {
            std::vector<RingVm> sub;
            for (const auto& v : ring_vms)
                if (std::find(nodes.begin(), nodes.end(), v.node) != nodes.end()) sub.push_back(v);
            return sub;
        };
        auto run_subring = [&](const std::vector<std::string>& members) { return run_vms(vms_of(members)); };
        SearchBudget budget;
        int log2n = 0;
        while ((size_t{1} << log2n) < met.size()) ++log2n;
        // One bad node costs about log2(n) runs, two about twice that; a
        // sub-ring run is short beside the stage, so allow for two.
        budget.max_runs = 4 * log2n + 4;
        budget.deadline = ctx.deadline() - timeout;
        ctx.progress(fmt::format("the ring of {} failed: localising the fault (at most {} sub-ring runs)",
                                 fmt::join(met, ", "), budget.max_runs));
        const SearchResult found = localise(met, run_subring, budget);
        mine = to_json(found);
        narrow_to_vms(options, ctx, mine, found, ring_vms, run_vms, budget.deadline);
    }
    return mine;
}

// The leader's search from every member's post under "localise"; null when
// the leader's pipeline ended before it searched: every member keeps the
// ring's failure, as before localisation.
json leaders_search(const std::map<std::string, json>& posts, const std::vector<std::string>& met) {
    auto it = posts.find(met.front());
    return it == posts.end() ? json(nullptr) : it->second;
}

}  // namespace

Result<json> SmokeStage::run_node(engine::StageContext& ctx) {
    auto& transport = *options_.transport;
    const auto& fleet = ctx.fleet();
    auto vms = transport.list_vms(ctx.node());
    if (!vms) return vms.error();
    if (vms->empty())
        return make_error("smoke", "smoke.no_vms",
                          "no VMs for node " + ctx.node().name + " (expected kiln-" + ctx.node().name + "-vm0, ...)");
    // A shared ring: wait for the other nodes that can still come; the ring
    // is whoever met, so a node that failed earlier does not hold it up.
    std::vector<std::string> met{ctx.node().name};
    // Back from a park while the ring's other nodes report: the ring met
    // and this node's ranks ran; what they gave is in the resume state.
    const json* resumed = ctx.resumed();
    if (resumed && resumed->value("phase", "") == "ring_localise")
        return await_localisation(ctx, resumed->at("met").get<std::vector<std::string>>(), resumed->at("result"),
                                  std::nullopt);
    const bool figures_resumed = resumed && resumed->value("phase", "") == "ring_figures";
    if (figures_resumed) {
        met = resumed->at("met").get<std::vector<std::string>>();
    } else if (auto ring = smoke_ring(fleet, ctx.node()); ring.size() > 1) {
        std::vector<std::string> names;
        for (const auto* n : ring) names.push_back(n->name);
        if (ctx.can_park()) {
            // Parked until the ring meets: no thread held while the others
            // come (a fleet ring's first node may wait out their firmware).
            std::string waiting;
            auto m = meeting_->arrive(ctx, names, &waiting);
            if (!m) return m.error();
            if (!*m) {
                return ctx
                    .park_for(kRingRecheck, json{{"phase", "ring_meeting"}},
                              fmt::format("the shared smoke ring to meet (missing {})", waiting),
                              RingMeeting::wake_key(names))
                    .error();
            }
            met = std::move(**m);
        } else {
            auto m = meeting_->meet(ctx, names);
            if (!m) return m.error();
            met = *m;
        }
    }
    // Once met, the others wait for this node's figures: an error still posts.
    auto leave_ring = [&](Error e) -> Error {
        if (met.size() > 1) meeting_->post(ctx, "figures", met, nullptr);
        return e;
    };
    // Every VM of the ring in rank order (node order in the fleet, then VM
    // index).
    std::vector<RingVm> ring_vms;
    int ordinal = 0;
    size_t members_left = met.size();
    for (const auto& n : fleet.nodes) {
        if (members_left == 0) break;
        auto listed = n.name == ctx.node().name ? Result<std::vector<std::string>>(*vms) : transport.list_vms(n);
        const bool member = std::find(met.begin(), met.end(), n.name) != met.end();
        if (member) --members_left;
        if (!listed) {
            if (member) return leave_ring(listed.error());
            continue;
        }
        for (size_t k = 0; k < listed->size(); ++k, ++ordinal)
            if (member) ring_vms.push_back({n.name, (*listed)[k], ordinal});
    }
    std::string peers;
    for (size_t r = 0; r < ring_vms.size(); ++r) {
        auto a = transport.address(ring_vms[r].ordinal);
        peers += (r ? "," : "") + a.dial_host + ":" + std::to_string(a.dial_port);
    }
    std::map<std::string, double> thresholds;
    std::chrono::milliseconds timeout{std::chrono::minutes(20)};
    RelativePolicy relative;
    std::vector<std::string> profile_args;
    if (const SmokeProfile* picked = smoke_profile(fleet, ctx.node())) {
        const auto& p = *picked;
        thresholds = p.thresholds;
        timeout = p.timeout;
        relative.floor = p.relative_floor;
        relative.fail = p.relative_verdict == "fail";
        if (p.rdma_bytes) profile_args.insert(profile_args.end(), {"--rdma-bytes", std::to_string(*p.rdma_bytes)});
        if (p.rdma_iterations)
            profile_args.insert(profile_args.end(), {"--rdma-iterations", std::to_string(*p.rdma_iterations)});
        if (p.rdma_pair_timeout)
            profile_args.insert(profile_args.end(),
                                {"--rdma-timeout", fmt::format("{:g}", p.rdma_pair_timeout->count() / 1000.0)});
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(ctx.deadline() - engine::StageContext::Clock::now());
    timeout = std::max(std::chrono::milliseconds(1000), std::min(timeout, left));
    // kiln-smoke's own bounds sit inside the stage's, so it reports rather
    // than gets killed.
    const auto connect_s = std::min<long long>(options_.connect_timeout.count(), timeout.count() / 3) / 1000.0;
    const auto check_s = std::max<double>(1.0, timeout.count() / 1000.0 / 6);

    RankArgs rank_args;
    rank_args.connect_s = static_cast<double>(connect_s);
    rank_args.check_s = check_s;
    rank_args.thresholds = thresholds;
    rank_args.extra = options_.extra_args;
    rank_args.profile = profile_args;
    std::vector<size_t> rank_of;  // ranks[i] is ring rank rank_of[i]
    auto ranks = ranks_of(transport, ctx.node().name, ring_vms, rank_args, &rank_of);
    // This node's ranks of the ring, run once: their reports as the result.
    auto run_ranks = [&]() -> Result<json> {
        ctx.progress(met.size() > 1 ? fmt::format("kiln-smoke on {} VM(s), ranks of a {}-VM ring over {}", ranks.size(),
                                                  ring_vms.size(), fmt::join(met, ", "))
                                    : fmt::format("kiln-smoke on {} VM(s)", ranks.size()));
        auto outputs = transport.run(ctx.node(), ranks, timeout);
        if (!outputs) return leave_ring(outputs.error());

        json vm_results = json::array();
        for (size_t k = 0; k < outputs->size(); ++k) {
            const auto& o = (*outputs)[k];
            json entry = {{"vm", o.vm}, {"rank", rank_of[k]}, {"exit_code", o.exit_code}, {"report", nullptr}};
            auto doc = o.timed_out ? std::nullopt : parse_report(o.out);
            Report parsed;
            std::string err;
            if (o.timed_out)
                entry["error"] = "kiln-smoke did not finish within " + std::to_string(timeout.count() / 1000) + " s";
            else if (!doc || !from_json(*doc, parsed, &err))
                entry["error"] = "kiln-smoke printed no report (exit " + std::to_string(o.exit_code) +
                                 (err.empty() ? "" : ", " + err) + "): " + tail(o.err, 200);
            else
                entry["report"] = *doc;
            // The fabric NICs' host functions travel with the figures, so
            // peers name them too.
            if (options_.vm_host_devices && entry["report"].is_object() && entry["report"].contains("rdma"))
                if (auto d = options_.vm_host_devices(fleet, ctx.node(), o.vm); d.ok())
                    trace_rails_to_host(entry, d->guest);
            vm_results.push_back(std::move(entry));
        }
        json result = {{"node", ctx.node().name},
                       {"input_hash", ctx.input_hash()},
                       {"ts_ms", journal::now_ms()},
                       {"transport", transport.name()},
                       {"vms", vm_results}};
        if (met.size() > 1) {
            result["ring"] = {{"scope", ring_scope(fleet, ctx.node())}, {"nodes", met}, {"ranks", ring_vms.size()}};
        }
        json th = json::object();
        for (const auto& [k, v] : thresholds) th[k] = v;
        result["thresholds"] = th;
        return result;
    };
    json result;
    if (figures_resumed) {
        result = resumed->at("result");
    } else {
        auto ran = run_ranks();
        if (!ran) return ran.error();
        result = std::move(*ran);
    }
    // A shared ring's figures come from every node of it: each node judges
    // its own VMs against the whole ring's distribution.
    json ring_vms_seen = nullptr;
    if (met.size() > 1) {
        std::map<std::string, json> all;
        if (ctx.can_park()) {
            // Parked until every member has reported (a slow member's run).
            std::string waiting;
            auto got = meeting_->gather(
                ctx, "figures", met, figures_resumed ? std::nullopt : std::optional<json>(own_vms(result)), &waiting);
            if (!got) return got.error();
            if (!*got)
                return ctx
                    .park_for(kRingRecheck, json{{"phase", "ring_figures"}, {"met", met}, {"result", result}},
                              fmt::format("the shared smoke ring's figures (missing {})", waiting),
                              RingMeeting::board_wake_key("figures", met))
                    .error();
            all = std::move(**got);
        } else {
            auto got = meeting_->exchange(ctx, "figures", met, own_vms(result));
            if (!got) return got.error();
            all = std::move(*got);
        }
        ring_vms_seen = json::array();
        for (const auto& [node, entries] : all)
            if (entries.is_array())
                for (const auto& e : entries) ring_vms_seen.push_back(e);
    }
    judge_result(result, thresholds, relative, ring_vms_seen);
    // A shared ring that failed as a whole blames every member: find the
    // member(s) that make it fail, so only they are quarantined.
    if (met.size() > 1 && ring_failed(ring_vms_seen)) {
        json mine = ctx.node().name == met.front()
                        ? search_ring_fault(options_, ctx, transport, met, ring_vms, rank_args, timeout)
                        : json(nullptr);
        if (ctx.can_park()) return await_localisation(ctx, met, std::move(result), std::move(mine));
        auto all = meeting_->exchange(ctx, "localise", met, mine);
        if (!all) return all.error();
        if (json found = leaders_search(*all, met); !found.is_null()) apply_localisation(result, found);
    }
    return result;
}

Result<json> SmokeStage::await_localisation(engine::StageContext& ctx, const std::vector<std::string>& met, json result,
                                            std::optional<json> post) {
    // Parked until the leader's search is posted: a ring of hundreds waits
    // for it without a thread each.
    std::string waiting;
    auto got = meeting_->gather(ctx, "localise", met, std::move(post), &waiting);
    if (!got) return got.error();
    if (!*got)
        return ctx
            .park_for(
                kRingRecheck, json{{"phase", "ring_localise"}, {"met", met}, {"result", result}},
                fmt::format("the shared smoke ring's fault localisation by {} (missing {})", met.front(), waiting),
                RingMeeting::board_wake_key("localise", met))
            .error();
    if (json found = leaders_search(**got, met); !found.is_null()) apply_localisation(result, found);
    return result;
}

void SmokeStage::end_run(const config::Fleet& fleet) {
    std::vector<std::string> nodes;
    nodes.reserve(fleet.nodes.size());
    for (const auto& n : fleet.nodes) nodes.push_back(n.name);
    meeting_->forget(nodes);
}

Status SmokeStage::apply(engine::StageContext& ctx, const engine::Action& action) {
    if (action.id != "smoke:run") return make_error("smoke", "smoke.action", "unknown action " + action.id);
    auto result = run_node(ctx);
    if (!result) return result.error();
    // The journal keeps each rank's document (no secrets in it: figures only).
    if (auto s = ctx.publish(kResultKind, kResultSchema, *result); !s) return s;
    const bool passed = result->value("verdict", "fail") == "pass";
    ctx.event("smoke.result", passed ? "pass" : "fail: " + describe_failures(*result));
    if (passed) return ok_status();
    if (options_.on_quarantine) options_.on_quarantine(ctx, *result);
    Error e = make_error("smoke", "smoke.failed", "failed checks: " + describe_failures(*result));
    e.quarantine = true;
    return e;
}

Status SmokeStage::verify(engine::StageContext& ctx) {
    auto last = latest_smoke_result(ctx);
    if (!last) return last.error();
    if (!*last) return make_error("smoke", "smoke.no_result", "no smoke result for " + ctx.node().name);
    if ((*last)->input_hash != ctx.input_hash())
        return make_error("smoke", "smoke.stale", "the smoke result predates the node's current inputs");
    if (!(*last)->passed()) {
        Error e = make_error("smoke", "smoke.failed", "failed checks: " + describe_failures((*last)->document));
        e.quarantine = true;
        return e;
    }
    return ok_status();
}

}  // namespace kiln::smoke
