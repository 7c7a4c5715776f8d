#include "firmware/bmc/libvirt_power.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

namespace kiln::bmc {

namespace {

std::string last_error() {
    virErrorPtr e = virGetLastError();
    return e && e->message ? e->message : "unknown libvirt error";
}

// libvirt prints errors to stderr by default; they come back as values here.
void quiet(void*, virErrorPtr) {}

}  // namespace

Result<std::shared_ptr<LibvirtPower>> LibvirtPower::connect(const std::string& uri, const std::string& domain) {
    virSetErrorFunc(nullptr, &quiet);
    virConnectPtr conn = virConnectOpen(uri.c_str());
    if (!conn)
        return make_error("bmc", "bmc.libvirt_connect", "cannot connect to libvirt at " + uri + ": " + last_error());
    virDomainPtr dom = virDomainLookupByName(conn, domain.c_str());
    if (!dom) {
        const std::string why = last_error();
        virConnectClose(conn);
        return make_error("bmc", "bmc.libvirt_domain", "libvirt at " + uri + " has no domain " + domain + ": " + why);
    }
    return std::shared_ptr<LibvirtPower>(new LibvirtPower(uri, domain, conn, dom));
}

LibvirtPower::~LibvirtPower() {
    if (dom_) virDomainFree(dom_);
    if (conn_) virConnectClose(conn_);
}

std::string LibvirtPower::describe() const {
    return "libvirt " + uri_ + " domain " + name_;
}

Result<std::string> LibvirtPower::power_state() {
    int state = 0, reason = 0;
    if (virDomainGetState(dom_, &state, &reason, 0) != 0) {
        return make_error("bmc", "bmc.libvirt_failed", "domain " + name_ + ": " + last_error());
    }
    switch (state) {
        case VIR_DOMAIN_RUNNING:
        case VIR_DOMAIN_BLOCKED:
            return std::string("On");
        case VIR_DOMAIN_PAUSED:
            return std::string("Paused");
        case VIR_DOMAIN_SHUTDOWN:
            return std::string("PoweringOff");
        default:  // SHUTOFF, CRASHED, PMSUSPENDED, NOSTATE
            return std::string("Off");
    }
}

Status LibvirtPower::reset(const std::string& type) {
    auto state = power_state();
    if (!state) return state.error();
    const bool running = *state == "On" || *state == "PoweringOff";
    const bool paused = *state == "Paused";
    int rc = 0;
    const char* what = "";
    if (type == "On" || type == "ForceOn") {
        what = "start";
        if (paused)
            rc = virDomainResume(dom_);
        else if (!running)
            rc = virDomainCreate(dom_);
    } else if (type == "ForceOff") {
        what = "destroy";
        if (running || paused) rc = virDomainDestroy(dom_);
    } else if (type == "GracefulShutdown") {
        what = "shut down";
        if (running) rc = virDomainShutdown(dom_);
    } else if (type == "ForceRestart" || type == "PowerCycle" || type == "FullPowerCycle") {
        what = "reset";
        rc = running || paused ? virDomainReset(dom_, 0) : virDomainCreate(dom_);
    } else if (type == "GracefulRestart") {
        what = "reboot";
        rc = running ? virDomainReboot(dom_, 0) : virDomainCreate(dom_);
    } else if (type == "PushPowerButton") {
        what = running ? "shut down" : "start";
        rc = running ? virDomainShutdown(dom_) : virDomainCreate(dom_);
    } else if (type == "Nmi") {
        what = "inject an NMI into";
        if (running) rc = virDomainInjectNMI(dom_, 0);
    } else if (type == "Pause" || type == "Suspend") {
        what = "suspend";
        if (running) rc = virDomainSuspend(dom_);
    } else if (type == "Resume") {
        what = "resume";
        if (paused) rc = virDomainResume(dom_);
    } else {
        return make_error("bmc", "bmc.libvirt_failed", "ResetType " + type + " has no libvirt equivalent");
    }
    if (rc != 0) {
        return make_error("bmc", "bmc.libvirt_failed",
                          std::string("cannot ") + what + " domain " + name_ + ": " + last_error());
    }
    return ok_status();
}

}  // namespace kiln::bmc
