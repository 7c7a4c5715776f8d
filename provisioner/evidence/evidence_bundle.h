// The evidence bundle for a quarantined node: one .tar.gz a crew attaches
// to a vendor RMA case, with a manifest.json listing each file, its sha256
// and where it came from, and a named "unavailable: <why>" line for each
// part that could not be gathered (a BMC that does not answer, a node
// without VMs). Parts:
//   smoke/      the smoke result, its failing checks, every localisation run
//   bmc/        log service entries (SEL, IML, event log), recent tasks, part
//               serials and the firmware inventory, over Redfish
//   vm/         each VM's serial console log
//   gpu/        the NVML state the guests reported (GPU nodes only)
//   journal/    the node's journal history
//   handover/   the node's handover record
// No secret of the fleet (and no live session token) is in any file: each
// is scrubbed before it is written and checked again after (secret_scrub.h).
// The archive is built in a staging folder by `tar` through a
// CommandRunner (argv, no shell) and renamed into place: a failure leaves
// no half-written archive.
//
// Errors, domain "evidence":
//   evidence.out      the output path cannot be created or is a folder
//   evidence.archive  tar could not be run or failed
//   evidence.secret   a secret survived scrubbing (a bug; nothing written)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/redfish/bmc_session.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/command.h"
#include "provisioner/journal/store.h"
#include "provisioner/net/http_client.h"

namespace kiln::evidence {

struct BundleRequest {
    const config::Fleet* fleet = nullptr;
    const config::Node* node = nullptr;
    std::string out;                             // the archive; "" = default_bundle_path()
    journal::Store* store = nullptr;             // the journal: history, smoke and handover records
    std::optional<nlohmann::json> smoke_result;  // given: packed instead of the journal's
    std::string store_unavailable;               // why there is no store, when null
    int history_limit = 0;                       // 0 = the whole history
    std::shared_ptr<net::HttpClient> http;       // default: curl
    std::shared_ptr<CommandRunner> commands;     // default: ProcessRunner
    redfish::Waiter wait;                        // default: sleeping
    redfish::SessionOptions bmc;                 // default: bundle_bmc_options()
    bool bmc_options_given = false;
    // Secret values from outside the fleet file (--store-password): scrubbed too.
    std::vector<std::string> extra_secrets;
};

struct BundleFile {
    std::string path;  // inside the archive, under <node>-evidence/
    std::string sha256;
    size_t bytes = 0;
    std::string source;  // where it came from ("redfish GET /redfish/v1/...", a file path, "journal")
    int redactions = 0;  // secret occurrences replaced in it
};

struct BundleReport {
    std::string archive;
    std::vector<BundleFile> files;
    nlohmann::json manifest;
};

// Short timeouts and few retries: evidence is gathered from BMCs that may
// be the very thing that is broken.
redfish::SessionOptions bundle_bmc_options();

// <fleet dir>/.kiln/evidence/<node>-<YYYYMMDDTHHMMSSZ>.tar.gz
std::string default_bundle_path(const config::Fleet& fleet, const std::string& node, int64_t now_ms);

Result<BundleReport> write_bundle(const BundleRequest& request);

}  // namespace kiln::evidence
