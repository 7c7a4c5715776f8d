#include "provisioner/vm/stage/vm_stage.h"

#include <filesystem>

#include "provisioner/vm/domain_manager.h"
#include "provisioner/vm/guest_contract.h"
#include "provisioner/vm/libvirt_hypervisor.h"
#include "provisioner/vm/overlay_disk.h"
#include "provisioner/vm/pcie_links.h"
#include "provisioner/vm/probe_guest.h"
#include "provisioner/vm/readiness.h"

namespace kiln::vm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string prefix_of(const std::string& node) {
    return "kiln-" + node + "-vm";
}

// "sha256:" plus 12 hex digits reads well in a plan line; file identities whole.
std::string short_identity(const std::string& id) {
    return id.rfind("sha256:", 0) == 0 ? id.substr(0, 19) : id;
}

int index_of(const NodeVms& vms, const std::string& name) {
    for (size_t i = 0; i < vms.vms.size(); ++i) {
        if (vms.vms[i].name == name) return static_cast<int>(i);
    }
    return -1;
}

std::string action_target(const engine::Action& a) {
    const size_t c = a.id.find(':');
    return c == std::string::npos ? "" : a.id.substr(c + 1);
}

std::string action_kind(const engine::Action& a) {
    return a.id.substr(0, a.id.find(':'));
}

// Each setpci read or write on the host.
constexpr std::chrono::milliseconds kPciCommandTimeout{std::chrono::seconds(30)};

std::string change_list(const std::vector<AcsChange>& changes, size_t max = 3) {
    std::string out;
    for (size_t i = 0; i < changes.size() && i < max; ++i) out += (i ? "; " : "") + changes[i].text();
    if (changes.size() > max) out += "; and " + std::to_string(changes.size() - max) + " more";
    return out;
}

}  // namespace

VmStageDeps default_vm_stage_deps() {
    VmStageDeps d;
    d.connect = [](const std::string& uri) -> Result<std::unique_ptr<Hypervisor>> {
        auto h = LibvirtHypervisor::open(uri);
        if (!h) return h.error();
        return std::unique_ptr<Hypervisor>(std::move(h).value());
    };
    d.runner = std::make_shared<ProcessRunner>();
    // Only "/sys" is this machine; any other root is a recorded tree.
    d.host_pci = [runner = d.runner](const std::string& root) -> std::shared_ptr<CommandRunner> {
        return root == "/sys" ? runner : nullptr;
    };
    d.probe = [](Hypervisor& hv, const std::string& dir) -> Result<ProbeResult> {
        auto kernel = find_host_kernel();
        if (!kernel) return ProbeResult{Accelerator::tcg, "no probe guest: " + kernel.error().message};
        auto init = find_probe_init();
        if (!init) return ProbeResult{Accelerator::tcg, "no probe guest: " + init.error().message};
        std::error_code ec;
        fs::create_directories(dir, ec);
        const std::string initrd = dir + "/probe-initrd.img";
        if (auto s = write_probe_initramfs(*init, initrd); !s) return s.error();
        ProbeOptions o;
        o.kernel = *kernel;
        o.initrd = initrd;
        o.work_dir = dir;
        return probe_accelerator(hv, o);
    };
    return d;
}

Result<std::unique_ptr<Hypervisor>> VmStage::connect(const NodeVms& vms) {
    return deps_.connect(vms.uri);
}

VmStage::AcsScope VmStage::acs_scope(const NodeVms& vms) const {
    AcsScope scope;
    if (deps_.host_pci) scope.runner = deps_.host_pci(vms.host.root);
    if (!scope.runner) return scope;
    std::vector<std::string> gpus;
    for (const auto& v : vms.placement.vms) {
        auto g = v.gpus();
        gpus.insert(gpus.end(), g.begin(), g.end());
    }
    scope.ports = acs_path_ports(vms.host, gpus);
    return scope;
}

Result<ProbeResult> VmStage::accelerator(Hypervisor& hv, const NodeVms& vms) {
    const std::string& setting = vms.shape->accelerator;
    if (setting != "auto") {
        auto a = parse_accelerator(setting);
        if (!a) return a.error();
        return ProbeResult{*a, "vm." + vms.shape->name + ".accelerator = " + setting};
    }
    const std::string uri = hv.uri();
    std::lock_guard<std::mutex> lock(probe_mu_);
    if (auto it = probed_.find(uri); it != probed_.end()) return it->second;
    ProbeResult r;
    if (uri.find("://") != std::string::npos && uri.find(":///") == std::string::npos) {
        r = {Accelerator::kvm, "remote hypervisor " + uri + ": kvm assumed (set accelerator = \"tcg\" to override)"};
    } else {
        auto p = deps_.probe(hv, fs::path(vms.dir).parent_path().string() + "/.probe");
        if (!p) return p.error();
        r = *p;
    }
    probed_[uri] = r;
    return r;
}

Result<engine::Observation> VmStage::observe(engine::StageContext& ctx) {
    auto vms = planner_.plan(ctx.fleet(), ctx.node());
    if (!vms) return vms.error();
    auto hv = connect(*vms);
    if (!hv) return hv.error();
    json list = json::array();
    for (const auto& v : vms->vms) {
        auto info = (*hv)->lookup(v.name);
        if (!info) return info.error();
        json o = {{"name", v.name},
                  {"desired_hash", v.desired_hash},
                  {"desired_base", v.options.base_identity},
                  {"defined", info->has_value()}};
        if (*info) {
            o["state"] = state_name((*info)->state);
            auto xml = (*hv)->definition(v.name);
            if (!xml) return xml.error();
            o["hash"] = stamped_hash(*xml);
            o["base"] = stamped_base(*xml);
            if ((*info)->state == DomainState::running) {
                // A run stopped while it waited leaves a running VM that has
                // not printed the marker yet: the plan waits for it again.
                // Remote or local, the marker is seen before a VM counts as ready.
                auto seen = observe_ready(**hv, v.name);
                if (!seen) return seen.error();
                o["ready"] = seen->marker.has_value();
            }
        }
        list.push_back(o);
    }
    auto names = (*hv)->list_names();
    if (!names) return names.error();
    json stale = json::array();
    for (const auto& n : *names) {
        if (n.rfind(prefix_of(ctx.node().name), 0) == 0 && index_of(*vms, n) < 0) stale.push_back(n);
    }
    engine::Observation obs;
    obs.state = {{"uri", (*hv)->uri()}, {"vms", list}, {"stale", stale}};
    // The links of what the VMs are given, as the host trained them.
    std::vector<std::string> devices;
    for (const auto& p : vms->placement.vms)
        for (const auto& d : p.devices()) devices.push_back(d);
    if (!devices.empty()) {
        const PcieLinkCheck links = check_pcie_links(vms->host, devices);
        obs.state["pcie_links"] = {{"links", links.links}, {"faults", links.faults}, {"unread", links.unread}};
        for (const auto& u : links.unread)
            obs.notes.push_back("PCIe link of " + u + " is not reported by the host, so it is not checked");
    }
    // Read at every observe, never cached: a reboot sets them back.
    const AcsScope acs = acs_scope(*vms);
    if (acs.runner) {
        auto changes = plan_acs(*acs.runner, acs.ports, kPciCommandTimeout);
        if (!changes) return changes.error();
        json c = json::array();
        for (const auto& ch : *changes) c.push_back({{"port", ch.port}, {"text", ch.text()}});
        obs.state["acs"] = {{"ports", acs.ports.size()}, {"changes", c}};
    }
    return obs;
}

// Each VM's define/redefine/reimage and start come first, without waiting,
// then one "ready" action waits for every started VM's marker: the VMs of a
// node boot side by side instead of one after another. Under TCG a start
// waits its turn instead (boot_gate.h), so there they boot one at a time.
Result<std::vector<engine::Action>> VmStage::plan(engine::StageContext& ctx, const engine::Observation& observed) {
    std::vector<engine::Action> out;
    // A device on a link that trained below its capability works, at a
    // fraction of its bandwidth: hardware to fix, not a VM to start.
    const json links = observed.state.value("pcie_links", json::object());
    if (const json faults = links.value("faults", json::array()); !faults.empty()) {
        std::string text = "node " + ctx.node().name + ": " + std::to_string(faults.size()) + " PCIe link" +
                           (faults.size() == 1 ? "" : "s") + " below capability: ";
        for (size_t i = 0; i < faults.size(); ++i) text += (i ? "; " : "") + faults[i].get<std::string>();
        Error e = make_error("vm", "vm.pcie_link_degraded", text + " (reseat or replace the part, then kiln apply)");
        e.quarantine = true;
        return e;
    }
    // Before any VM starts: a guest's GPUDirect traffic would go the long way round.
    const json acs = observed.state.value("acs", json::object());
    if (const json changes = acs.value("changes", json::array()); !changes.empty()) {
        std::string text = "clear ACS P2P redirect (RR, CR; SV kept) on " + std::to_string(changes.size()) + " of " +
                           std::to_string(acs.value("ports", 0)) + " switch ports on the GPUDirect paths: ";
        for (size_t i = 0; i < changes.size() && i < 3; ++i)
            text += (i ? "; " : "") + changes[i]["text"].get<std::string>();
        if (changes.size() > 3) text += "; and " + std::to_string(changes.size() - 3) + " more";
        out.push_back({"host-acs:" + ctx.node().name, text, {{"changes", changes}}});
    }
    for (const auto& n : observed.state.value("stale", json::array())) {
        out.push_back({"undefine:" + n.get<std::string>(), "undefine leftover domain " + n.get<std::string>()});
    }
    std::vector<std::string> waits;
    for (const auto& v : observed.state.value("vms", json::array())) {
        const std::string name = v["name"];
        if (!v["defined"].get<bool>()) {
            out.push_back({"define:" + name, "define " + name + " on a fresh overlay disk"});
            out.push_back({"start:" + name, "start " + name});
        } else if (ctx.reimage()) {
            out.push_back({"reimage:" + name, "reimage " + name + ": new overlay disk, same domain, started"});
        } else if (const std::string had = v.value("base", ""), wants = v.value("desired_base", "");
                   !had.empty() && !wants.empty() && had != wants) {
            // The overlay records its base's blocks, not its content: on a
            // rebuilt base it reads as a corrupt disk. Only a new overlay is safe.
            out.push_back({"reimage:" + name,
                           "reimage " + name + ": its base image changed (" + short_identity(had) + " -> " +
                               short_identity(wants) + "), so its overlay disk is replaced",
                           {{"had_base", had}, {"wants_base", wants}}});
        } else if (v.value("hash", "") != v["desired_hash"].get<std::string>()) {
            out.push_back({"redefine:" + name,
                           "redefine " + name + " (its definition differs from the wanted one)",
                           {{"had", v.value("hash", "")}, {"wants", v["desired_hash"]}}});
            out.push_back({"start:" + name, "start " + name});
        } else if (v.value("state", "") != "running") {
            out.push_back({"start:" + name, "start " + name + " (" + v.value("state", "") + ")"});
        } else if (v.value("ready", true)) {
            continue;
        }
        waits.push_back(name);
    }
    if (!waits.empty()) {
        std::string list;
        for (const auto& w : waits) list += (list.empty() ? "" : ",") + w;
        std::string text = "wait for " + std::string(kReadyMarker) + " on ";
        for (size_t i = 0; i < waits.size(); ++i) text += (i ? ", " : "") + waits[i];
        out.push_back({"ready:" + list, text});
    }
    return out;
}

Status VmStage::prepare_files(engine::StageContext& ctx, const NodeVms& vms, size_t i, bool new_disk) {
    const NodeVm& v = vms.vms[i];
    std::error_code ec;
    fs::create_directories(vms.dir, ec);
    if (ec) return make_error("vm", "vm.files", "cannot create " + vms.dir + ": " + ec.message());
    if (new_disk || !fs::exists(v.files.overlay, ec)) {
        if (vms.shape->base_image.empty()) {
            return make_error("vm", "vm.config",
                              vms.shape->pos.str() + ": vm." + vms.shape->name +
                                  ".base_image: not set; the VMs need a guest image to boot");
        }
        ctx.progress(v.name + ": overlay on " + vms.shape->base_image);
        if (auto s = create_overlay(*deps_.runner, vms.shape->base_image, v.files.overlay); !s) return s;
    }
    SeedConfig seed = v.seed;
    if (new_disk) seed.instance_id += "-" + std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
    return build_seed_iso(*deps_.runner, seed, v.files.seed_iso);
}

Status VmStage::define(engine::StageContext& ctx, Hypervisor& hv, const NodeVms& vms, size_t i) {
    auto accel = accelerator(hv, vms);
    if (!accel) return accel.error();
    ctx.event("accelerator", std::string(accelerator_name(accel->accelerator)) + " (" + accel->reason + ")");
    auto xml = vms.xml(i, accel->accelerator);
    if (!xml) return xml.error();
    return hv.define(*xml);
}

namespace {
constexpr std::chrono::milliseconds kReadyParkPoll{1000};
std::string boot_turn_key(const std::string& uri) {
    return "vm.boot-turn:" + uri;
}
}  // namespace

Status VmStage::boot_turn(engine::StageContext& ctx, Hypervisor& hv, const NodeVms& vms, const std::string& name) {
    auto accel = accelerator(hv, vms);
    if (!accel) return accel.error();
    if (accel->accelerator != Accelerator::tcg) return ok_status();
    // A holder that stopped, vanished or cannot be read is not booting.
    const auto booting = [&hv](const std::string& other) {
        auto seen = check_ready(hv, other, nullptr);
        return seen.ok() && !seen->has_value();
    };
    bool shown = false;
    for (;;) {
        const int limit = vms.shape->tcg_parallel_boots;
        const std::string ahead = boot_gate_.take(
            hv.uri(), name, limit, engine::StageContext::Clock::now() + vms.shape->boot_timeout, booting);
        if (ahead.empty()) return ok_status();
        const std::string reason = name + " starts once " + ahead + " has booted (TCG: " +
                                   (limit == 1 ? std::string("one boot") : std::to_string(limit) + " boots") +
                                   " at a time on " + hv.uri() + ")";
        // Woken when the VM ahead is seen ready; the poll catches one that stopped.
        if (ctx.can_park())
            return ctx.park_for(kReadyParkPoll, nlohmann::json::object(), reason, boot_turn_key(hv.uri()));
        if (!shown) ctx.progress("waiting: " + reason);
        shown = true;
        if (!ctx.wait_for(kReadyParkPoll)) return make_error("vm", "vm.interrupted", "stopped while " + reason);
    }
}

void VmStage::booted(engine::StageContext& ctx, Hypervisor& hv, const std::string& name) {
    boot_gate_.release(hv.uri(), name);
    ctx.wake(boot_turn_key(hv.uri()));
}

// The VMs were started side by side, so waiting for them one after another
// takes as long as the slowest boot; each wait is bounded by boot_timeout
// from when it began. Through the engine the node parks between looks (a
// boot takes minutes; no thread is held), resuming at the VM it was on.
Status VmStage::wait_ready(engine::StageContext& ctx, Hypervisor& hv, const NodeVms& vms,
                           const std::vector<std::string>& names) {
    using Clock = engine::StageContext::Clock;
    size_t first = 0;
    std::optional<Clock::time_point> resumed_deadline;
    if (const auto* r = ctx.resumed(); r && r->value("phase", "") == "ready") {
        first = r->value("next", size_t{0});
        resumed_deadline = Clock::time_point(std::chrono::milliseconds(r->value("deadline_ms", int64_t{0})));
    }
    if (ctx.can_park()) {
        for (size_t k = first; k < names.size(); ++k) {
            const std::string& name = names[k];
            if (index_of(vms, name) < 0)
                return make_error("vm", "vm.plan", "ready names " + name + ", which this node does not want");
            const bool resuming = k == first && resumed_deadline;
            if (!resuming) ctx.progress(name + ": waiting for " + kReadyMarker);
            const auto deadline = resuming ? *resumed_deadline : Clock::now() + vms.shape->boot_timeout;
            std::string not_yet;
            auto seen = check_ready(hv, name, &not_yet);
            if (!seen) return seen.error();
            if (*seen) {
                ctx.event("ready", name + ": " + (*seen)->line);
                booted(ctx, hv, name);
                continue;
            }
            const auto now = Clock::now();
            if (now >= deadline) return not_ready_error(name, vms.shape->boot_timeout, not_yet);
            nlohmann::json state = {
                {"phase", "ready"},
                {"next", k},
                {"deadline_ms",
                 std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_since_epoch()).count()}};
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
            // A second between looks: each resume re-plans and reconnects.
            return ctx.park_for(std::min(kReadyParkPoll, left), std::move(state), name + ": booting (" + not_yet + ")");
        }
        return ok_status();
    }
    DomainManager dm(hv, *deps_.runner);
    for (const auto& name : names) {
        if (index_of(vms, name) < 0)
            return make_error("vm", "vm.plan", "ready names " + name + ", which this node does not want");
        ctx.progress(name + ": waiting for " + kReadyMarker);
        ReadyWait w;
        w.timeout = vms.shape->boot_timeout;
        w.sleep = [&ctx](std::chrono::milliseconds d) { return ctx.wait_for(d); };
        auto r = dm.wait_ready(name, w);
        if (!r) return r.error();
        ctx.event("ready", name + ": " + r->line);
        booted(ctx, hv, name);
    }
    return ok_status();
}

Status VmStage::apply(engine::StageContext& ctx, const engine::Action& action) {
    auto vms = planner_.plan(ctx.fleet(), ctx.node());
    if (!vms) return vms.error();
    auto hv = connect(*vms);
    if (!hv) return hv.error();
    const std::string kind = action_kind(action);
    const std::string name = action_target(action);
    if (kind == "host-acs") {
        const AcsScope acs = acs_scope(*vms);
        if (!acs.runner)
            return make_error("vm", "vm.plan", "action " + action.id + ": " + vms->host.root + " is not a live host");
        ctx.progress("clearing ACS P2P redirect on the GPUDirect path ports (setpci)");
        auto done = apply_acs(*acs.runner, acs.ports, kPciCommandTimeout);
        if (!done) {
            Error e = done.error();
            e.message = "node " + ctx.node().name + " ACS: " + e.message;
            return e;
        }
        for (const auto& c : *done) ctx.progress("set " + c.text());
        return ok_status();
    }
    DomainManager dm(**hv, *deps_.runner);
    if (kind == "undefine") return dm.undefine(name);
    if (kind == "ready") {
        std::vector<std::string> names;
        for (size_t b = 0; b <= name.size();) {
            const size_t e = std::min(name.find(',', b), name.size());
            if (e > b) names.push_back(name.substr(b, e - b));
            b = e + 1;
        }
        return wait_ready(ctx, **hv, *vms, names);
    }
    const int i = index_of(*vms, name);
    if (i < 0) return make_error("vm", "vm.plan", "action " + action.id + " names no VM this node wants");
    const size_t idx = static_cast<size_t>(i);
    if (kind == "define") {
        if (auto s = prepare_files(ctx, *vms, idx, /*new_disk=*/true); !s) return s;
        return define(ctx, **hv, *vms, idx);
    }
    if (kind == "redefine") {
        if (auto s = dm.stop(name); !s) return s;
        if (auto s = prepare_files(ctx, *vms, idx, /*new_disk=*/false); !s) return s;
        return define(ctx, **hv, *vms, idx);
    }
    if (kind == "start" || kind == "reimage") {
        // Its turn first, so that a park resumes with nothing done yet.
        if (auto s = boot_turn(ctx, **hv, *vms, name); !s) return s;
        Status s = ok_status();
        if (kind == "reimage") {
            s = dm.stop(name);
            if (s) s = prepare_files(ctx, *vms, idx, /*new_disk=*/true);
            if (s) s = define(ctx, **hv, *vms, idx);  // same name and UUID; refreshed if the config moved
        }
        if (s) s = dm.start(name);
        if (s) {
            boot_gate_.started((*hv)->uri(), name);
        } else {
            booted(ctx, **hv, name);  // it is not booting: the next one's turn
        }
        return s;
    }
    return make_error("vm", "vm.plan", "unknown action " + action.id);
}

Status VmStage::verify(engine::StageContext& ctx) {
    auto vms = planner_.plan(ctx.fleet(), ctx.node());
    if (!vms) return vms.error();
    auto hv = connect(*vms);
    if (!hv) return hv.error();
    for (const auto& v : vms->vms) {
        auto info = (*hv)->lookup(v.name);
        if (!info) return info.error();
        if (!*info) return make_error("vm", "vm.verify", v.name + " is not defined");
        if ((*info)->state != DomainState::running) {
            return make_error("vm", "vm.verify", v.name + " is " + state_name((*info)->state) + ", not running");
        }
        auto xml = (*hv)->definition(v.name);
        if (!xml) return xml.error();
        if (stamped_hash(*xml) != v.desired_hash)
            return make_error("vm", "vm.verify", v.name + " is not the wanted definition");
        auto seen = observe_ready(**hv, v.name);
        if (!seen) return seen.error();
        if (!seen->marker) {
            return make_error("vm", "vm.verify",
                              v.name + " is running but has not printed " + std::string(kReadyMarker) + " (" +
                                  seen->source + ": " + seen->not_yet + ")");
        }
    }
    const AcsScope acs = acs_scope(*vms);
    if (acs.runner) {
        auto left = plan_acs(*acs.runner, acs.ports, kPciCommandTimeout);
        if (!left) return left.error();
        if (!left->empty())
            return make_error("vm", "vm.verify",
                              "ACS still redirects P2P on the GPUDirect paths: " + change_list(*left));
    }
    return ok_status();
}

}  // namespace kiln::vm
