// The firmware stage's host OS boot (host_os_boot.h): planning from the
// observation, and FirmwareStage::boot_host_os / wait_booted /
// verify_host_os. Split from firmware_stage.cc to keep each file about one
// flow.
#include "firmware/stage/host_os_boot.h"

#include <algorithm>

#include <fmt/format.h>

#include "firmware/redfish/task_monitor.h"
#include "firmware/stage/artifact_server.h"
#include "firmware/stage/firmware_stage.h"

namespace kiln::firmware {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

Error boot_error(const std::string& code, const std::string& message, bool transient = false) {
    return make_error("firmware", code, message, transient);
}

// The image URI without query or fragment.
std::string uri_path(const std::string& uri) {
    return uri.substr(0, uri.find_first_of("?#"));
}

// What messages show of an image URI: its file name. The rest may be an
// artifact server's unguessable token or someone's credentials.
std::string shown_image(const std::string& uri) {
    if (uri.empty()) return "nothing";
    std::string path = uri_path(uri);
    auto slash = path.find_last_of('/');
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    return name.empty() ? "an image" : "'" + name + "'";
}

std::string joined(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
    return out;
}

Status check_capable(const config::Node& node, const HostOsImage& os, bool has_cd,
                     const std::vector<std::string>& collections, const std::vector<std::string>& boot_targets) {
    if (!has_cd)
        return boot_error(
            "firmware.no_virtual_media",
            fmt::format("node {}: host_os '{}': the BMC at {} has no virtual CD/DVD drive ({}); it cannot boot an "
                        "image over virtual media",
                        node.name, os.name, node.bmc.url,
                        collections.empty()
                            ? std::string("neither its ComputerSystem nor its Manager links VirtualMedia")
                            : "no VirtualMedia member with MediaTypes CD or DVD in " + joined(collections)));
    if (!boot_targets.empty() && std::find(boot_targets.begin(), boot_targets.end(), "Cd") == boot_targets.end())
        return boot_error("firmware.boot_target",
                          fmt::format("node {}: host_os '{}': the BMC does not allow BootSourceOverrideTarget Cd "
                                      "(it allows {})",
                                      node.name, os.name, joined(boot_targets)));
    return ok_status();
}

std::vector<std::string> strings_of(const json& j) {
    std::vector<std::string> out;
    if (j.is_array())
        for (const auto& s : j)
            if (s.is_string()) out.push_back(s.get<std::string>());
    return out;
}

// A ComputerSystem's PowerState and whether its Cd/Once override is armed.
struct SystemBoot {
    std::string power;
    bool armed = false;
};
Result<SystemBoot> system_boot(const redfish::Response& r) {
    redfish::JsonView v = r.view();
    SystemBoot out;
    auto power = v.opt_str("PowerState");
    if (!power) return power.error();
    out.power = *power;
    if (auto boot = v.find("Boot")) {
        auto target = boot->opt_str("BootSourceOverrideTarget");
        if (!target) return target.error();
        auto enabled = boot->opt_str("BootSourceOverrideEnabled");
        if (!enabled) return enabled.error();
        out.armed = cd_override_armed(*target, *enabled);
    }
    return out;
}

}  // namespace

std::string boot_action_id(const HostOsImage& os) {
    return fmt::format("boot:{}:{}", os.name, os.sha256.substr(0, 12));
}

bool media_is(const std::string& image_uri, const HostOsImage& os) {
    const std::string path = uri_path(image_uri);
    const std::string suffix = "/" + ArtifactServer::served_suffix(os.image, os.sha256);
    return path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool cd_override_armed(const std::string& target, const std::string& enabled) {
    return target == "Cd" && enabled == "Once";
}

Status check_boot_capable(const config::Node& node, const HostOsImage& os, const BmcInventory& inv) {
    return check_capable(node, os, inv.cd.has_value(), inv.virtual_media_collections, inv.boot_targets);
}

Result<std::optional<engine::Action>> plan_host_os_boot(const config::Node& node, const HostOsImage& os,
                                                        const json& st) {
    const json vm = st.value("virtual_media", json());
    const json boot = st.value("boot", json::object());
    if (auto ok = check_capable(node, os, vm.is_object(), strings_of(st.value("virtual_media_collections", json())),
                                strings_of(boot.value("targets", json())));
        !ok)
        return ok.error();
    const std::string image = vm.value("image", "");
    const bool holds = vm.value("inserted", false) && media_is(image, os);
    const bool armed = cd_override_armed(boot.value("target", ""), boot.value("enabled", ""));
    if (holds && !armed) return std::optional<engine::Action>();
    engine::Action a;
    a.id = boot_action_id(os);
    const std::string file = shown_image(os.image);
    a.description =
        holds ? fmt::format("reset the host to boot host OS {} ({}), inserted but not yet booted", os.name, file)
              : fmt::format("boot host OS {} ({}) from the virtual CD (it holds {})", os.name, file,
                            vm.value("inserted", false) ? shown_image(image) : "nothing");
    a.detail = {{"host_os", os.name},
                {"image", file},
                {"sha256", os.sha256},
                {"slot", vm.value("uri", "")},
                {"from", vm.value("inserted", false) ? shown_image(image) : "nothing"}};
    return std::optional<engine::Action>(std::move(a));
}

Status FirmwareStage::boot_host_os(engine::StageContext& ctx, redfish::Client& client, const engine::Action& action) {
    const config::Node& node = ctx.node();
    const auto* os = host_os_image(ctx.fleet(), node);
    if (!os || boot_action_id(*os) != action.id)
        return boot_error("firmware.action",
                          fmt::format("action {} names no host_os of node {}", action.id, node.name));
    // Back from a park while the host boots: the media is in and the host
    // reset (the artifact server keeps serving the image for the run).
    if (const json* resumed = ctx.resumed(); resumed && resumed->value("phase", "") == "host_boot") {
        json st = *resumed;
        auto until = Clock::time_point(std::chrono::milliseconds(st.value("until_ms", int64_t{0})));
        if (st.contains("reset")) {  // parked inside the reset: the boot's time starts after it
            if (auto r = resume_reset(ctx, client, st); !r) return r;
            until = Clock::now() + options_.settle_timeout;
        }
        return wait_booted(ctx, client, st.value("system_uri", ""), st.value("power", ""), st.value("what", os->name),
                           until);
    }
    // Back from a park on a media or override write's task (its step is
    // done): what the BMC shows decides the rest, as after a kill, except
    // that a media change just made is checked and the override re-armed.
    std::string after_task;
    if (const json* resumed = ctx.resumed(); resumed && resumed->value("phase", "") == "host_media") {
        const redfish::TaskOptions topts = task_options();
        auto poll = redfish::TaskPoll::restore(resumed->at("poll"), topts);
        if (!poll) return poll.error();
        json parked = *resumed;
        after_task = resumed->value("step", "");
        if (auto st = poll_or_park(ctx, client, *poll, parked, "host OS media: " + after_task); !st) return st;
    }
    // The image first: a file that is not the fleet's stops here, before
    // anything is sent to the BMC.
    auto server = artifacts(ctx.fleet());
    if (!server) return server.error();
    ctx.progress(fmt::format("checking the sha256 of host OS image {}", shown_image(os->image)));
    auto url = (*server)->publish(os->image, os->sha256, true);
    if (!url) return url.error();

    // What the BMC shows now decides (a killed run may have done part of it).
    auto inv = read_inventory(
        client, {.bios = false, .network_adapters = false, .virtual_media = true, .system_uri = ctx.node().bmc.system});
    if (!inv) return inv.error();
    if (auto st = check_boot_capable(node, *os, *inv); !st) return st;
    const VirtualMediaSlot cd = *inv->cd;
    const bool holds = cd.inserted && media_is(cd.image, *os);
    // Just inserted: an override the BMC dropped with the media change is
    // not a boot that used it up.
    const bool just_inserted = after_task == "insert" || after_task == "rearm";
    if (holds && !just_inserted && !cd_override_armed(inv->boot_target, inv->boot_enabled)) {
        ctx.event("note", fmt::format("host OS {} is inserted and was booted already: nothing to do", os->name));
        return ok_status();
    }
    const json arm = {{"Boot", {{"BootSourceOverrideTarget", "Cd"}, {"BootSourceOverrideEnabled", "Once"}}}};
    if (!holds) {
        // Armed before the media goes in (see host_os_boot.h).
        if (!cd_override_armed(inv->boot_target, inv->boot_enabled)) {
            ctx.progress("setting a one-time boot override to Cd");
            if (auto st = media_write(ctx, client, client.patch(inv->system_uri, arm), "arm"); !st) return st;
        }
        if (cd.inserted || !cd.image.empty()) {
            ctx.progress(fmt::format("ejecting {} from {}", shown_image(cd.image), cd.uri));
            auto r = cd.eject_target.empty() ? client.patch(cd.uri, json{{"Image", nullptr}, {"Inserted", false}})
                                             : client.post(cd.eject_target, json::object());
            if (auto st = media_write(ctx, client, r, "eject"); !st) return st;
        }
        ctx.progress(fmt::format("inserting host OS image {} in {}", shown_image(os->image), cd.uri));
        const json media = {{"Image", *url}, {"Inserted", true}, {"WriteProtected", true}};
        auto r = cd.insert_target.empty() ? client.patch(cd.uri, media) : client.post(cd.insert_target, media);
        if (auto st = media_write(ctx, client, r, "insert"); !st) return st;
    }
    if (!holds || after_task == "insert") {
        auto back = client.get(cd.uri);
        if (!back) return back.error();
        redfish::JsonView bv = back->view();
        auto shown = bv.opt_str("Image");
        if (!shown) return shown.error();
        bool inserted = true;
        if (auto i = bv.find("Inserted")) {
            auto b = i->boolean();
            if (!b) return b.error();
            inserted = *b;
        }
        if (!inserted || !media_is(*shown, *os))
            return boot_error("firmware.boot",
                              fmt::format("node {}: {} accepted the image but shows {} inserted", node.name, cd.uri,
                                          inserted ? shown_image(*shown) : "nothing"));
        // Some BMCs drop a pending override when the media changes: arm again.
        auto sys = client.get(inv->system_uri);
        if (!sys) return sys.error();
        auto sb = system_boot(*sys);
        if (!sb) return sb.error();
        if (!sb->armed)
            if (auto st = media_write(ctx, client, client.patch(inv->system_uri, arm), "rearm"); !st) return st;
    }
    const json after = {
        {"phase", "host_boot"}, {"system_uri", inv->system_uri}, {"power", inv->power_state}, {"what", os->name}};
    if (auto st = reset_host(ctx, client, *inv, after); !st) return st;
    ctx.progress(fmt::format("waiting for the host to boot host OS {}", os->name));
    return wait_booted(ctx, client, inv->system_uri, inv->power_state, os->name,
                       Clock::now() + options_.settle_timeout);
}

Status FirmwareStage::media_write(engine::StageContext& ctx, redfish::Client& client,
                                  const Result<redfish::Response>& r, const std::string& step) {
    if (!r) return r.error();
    if (!r->ok()) return redfish::status_error(*r);
    if (r->status != 202) return ok_status();
    const redfish::TaskOptions topts = task_options();
    auto poll = redfish::TaskPoll::start(client, *r, topts);
    if (!poll) return poll.error();
    json parked = {{"phase", "host_media"}, {"step", step}};
    return poll_or_park(ctx, client, *poll, parked, "host OS media: " + step);
}

// Until the host is On and its one-time override used up: the boot the
// override steered has started (DSP0266: Once returns to Disabled then).
Status FirmwareStage::wait_booted(engine::StageContext& ctx, redfish::Client& client, const std::string& system_uri,
                                  std::string power, const std::string& what, Clock::time_point until) {
    bool armed = true;
    for (;;) {
        auto sys = client.get(system_uri);
        if (sys) {
            auto sb = system_boot(*sys);
            if (!sb) return sb.error();
            power = sb->power;
            armed = sb->armed;
            if (power == "On" && !armed) return ok_status();
        } else if (!sys.error().transient && sys.error().code != "redfish.status") {
            return sys.error();
        }
        if (Clock::now() >= until)
            return boot_error(
                "firmware.boot",
                armed ? fmt::format("node {}: the host was reset but the BMC still shows the one-time Cd boot "
                                    "override unused: the host did not boot host OS {}",
                                    ctx.node().name, what)
                      : fmt::format("node {}: the host is {} after the reset for host OS {}", ctx.node().name,
                                    power.empty() ? "in an unknown power state" : power, what));
        if (ctx.can_park()) {
            // POST and the boot take minutes on real hosts: no thread held.
            json next = {
                {"phase", "host_boot"},
                {"system_uri", system_uri},
                {"power", power},
                {"what", what},
                {"until_ms", std::chrono::duration_cast<std::chrono::milliseconds>(until.time_since_epoch()).count()}};
            return ctx.park_for(
                options_.settle_poll, std::move(next),
                fmt::format("the host booting host OS {} ({}{})", what, power.empty() ? "power unknown" : power,
                            armed ? ", boot override not yet used" : ""));
        }
        if (!ctx.wait_for(options_.settle_poll))
            return boot_error("firmware.stopped", fmt::format("stopped while waiting for the host to boot {}", what));
    }
}

Status FirmwareStage::verify_host_os(engine::StageContext& ctx, const BmcInventory& inv) {
    const auto* os = host_os_image(ctx.fleet(), ctx.node());
    if (!os) return ok_status();
    if (auto st = check_boot_capable(ctx.node(), *os, inv); !st) return st;
    if (!inv.cd->inserted || !media_is(inv.cd->image, *os))
        return boot_error("firmware.verify", fmt::format("{} holds {}, host_os '{}' wants {}", inv.cd->uri,
                                                         inv.cd->inserted ? shown_image(inv.cd->image) : "nothing",
                                                         os->name, shown_image(os->image)));
    if (cd_override_armed(inv.boot_target, inv.boot_enabled))
        return boot_error("firmware.verify", fmt::format("host OS {} is inserted but its one-time Cd boot was not "
                                                         "used: the host has not booted it",
                                                         os->name));
    return ok_status();
}

}  // namespace kiln::firmware
