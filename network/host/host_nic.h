// The host side of the RoCE profile: one NIC's MTU, SR-IOV VF count, DSCP
// trust, PFC on the RoCE priority and ECN enables, set and read back through
// the tools every host has (ip, dcb, sysfs via cat/tee), plus the ConnectX
// firmware settings, which it only reads (the network stage sets them and
// reboots the host: nic_firmware.h).
//
// Every command goes through a CommandRunner: a ProcessRunner to act on this
// machine, an SshRunner (network/ssh_runner.h) to act on a GPU host over SSH
// (all argv tokens are ssh-safe; values are written with `tee FILE` on stdin,
// never with shell redirection).
//
//   HostNicApplier applier(runner);           // std::shared_ptr<CommandRunner>
//   NicDesired want = nic_desired_from_profile(profile, "ens1f0np0");
//   want.sriov_vfs = 8;
//   auto report = applier.apply(want);        // or observe(want): reads only
//   report->converged()                        // every item Ok or Changed
//
// Each setting gives one NicItem with an explicit outcome:
//   ok           already as desired (read back)
//   changed      set now and read back as desired
//   unsupported  the NIC or host lacks the feature (veth has no DCB and no
//                SR-IOV; no mlxconfig): reported, never silently skipped
//   needs-reboot ConnectX firmware (SRIOV_EN, NUM_OF_VFS, ATS_ENABLED) differs
//                for the next boot or still runs the old value: `detail`
//                holds the mlxconfig command; apply() here never runs it
//   drift        observe() only: differs, would be changed by apply()
//   failed       the change was refused or did not read back
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "network/stage/network_config.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/command.h"
#include "provisioner/core/result.h"

namespace kiln::network::host {

struct FirmwareWanted {
    bool sriov_en = true;
    int num_of_vfs = 0;
    bool ats_enabled = true;  // ATS lets GPUDirect RDMA work inside a VM
    // RoCE congestion control in firmware, on the NIC's own port (the _P1 or
    // _P2 key by the netdev's port, nic_firmware.h); unset = left alone; a firmware
    // without the key reports it unsupported.
    std::optional<int> roce_cc_prio_mask;  // ROCE_CC_PRIO_MASK: a bit per priority with congestion control
    std::optional<int> cnp_dscp;           // CNP_DSCP: DSCP of the CNPs the NIC sends
    std::optional<int> cnp_802p_prio;      // CNP_802P_PRIO: their 802.1p priority
    // MAX_ACC_OUT_READ (ConnectX-6 Dx, ConnectX-7): outstanding PCIe reads,
    // GPUDirect read throughput; device-wide, set only where the device's
    // query lists it (else unsupported, left alone); unset = left alone.
    std::optional<int> max_acc_out_read;
};

struct NicDesired {
    std::string ifname;  // "ens1f0np0"
    std::optional<int> mtu;
    std::optional<int> sriov_vfs;  // sriov_numvfs
    std::optional<int> roce_dscp;  // with roce_priority: DSCP trust, dscp -> priority
    std::optional<int> cnp_dscp;   // with cnp_priority
    int roce_priority = 3;
    int cnp_priority = 6;
    std::optional<int> pfc_priority;  // PFC on this priority only
    std::vector<int> ecn_priorities;  // ECN (RoCE NP and RP) enabled on these
    std::optional<FirmwareWanted> firmware;
};

// MTU, DSCP trust, PFC and ECN from the fleet's RoCE profile; no VFs or firmware.
NicDesired nic_desired_from_profile(const network::RoceProfile& profile, const std::string& ifname);

enum class NicOutcome { Ok, Changed, Unsupported, NeedsReboot, Drift, Failed };
std::string to_string(NicOutcome o);

struct NicItem {
    std::string setting;  // "mtu", "sriov_numvfs", "dscp_trust", "pfc", "ecn", "firmware SRIOV_EN"...
    std::string desired;
    std::string observed;  // before any change; "" when it cannot be read
    NicOutcome outcome = NicOutcome::Ok;
    std::string detail;       // why unsupported / failed; for needs-reboot, the plan
    std::string str() const;  // "ens1f0 mtu: 1500 -> 9000 (changed)"
};

struct NicReport {
    std::string ifname;
    std::vector<NicItem> items;
    bool converged() const;  // all ok or changed
    const NicItem* find(const std::string& setting) const;
};

struct HostNicOptions {
    std::chrono::seconds timeout{30};  // per command
    std::string sysfs = "/sys";        // where sysfs is mounted on the host
};

class HostNicApplier {
public:
    explicit HostNicApplier(std::shared_ptr<CommandRunner> runner, HostNicOptions options = {});

    // Reads only: each item ok, drift, unsupported or needs-reboot.
    Result<NicReport> observe(const NicDesired& want);
    // Sets what differs and reads it back. An error only when the interface
    // does not exist or cannot be read at all; per-setting problems are items.
    Result<NicReport> apply(const NicDesired& want);

private:
    Result<NicReport> run(const NicDesired& want, bool change);
    Result<CommandResult> exec(std::vector<std::string> argv, std::string stdin_data = {});
    void mtu(const NicDesired& w, bool change, NicReport& r);
    void sriov(const NicDesired& w, bool change, NicReport& r);
    void dscp_trust(const NicDesired& w, bool change, NicReport& r);
    void pfc(const NicDesired& w, bool change, NicReport& r);
    void ecn(const NicDesired& w, bool change, NicReport& r);
    void firmware(const NicDesired& w, NicReport& r);
    std::optional<std::string> read_sysfs(const std::string& path);

    std::shared_ptr<CommandRunner> runner_;
    HostNicOptions options_;
};

}  // namespace kiln::network::host
