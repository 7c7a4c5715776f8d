// Keeps secrets out of an evidence bundle: every value the fleet's secret
// references resolve to (BMC and switch passwords, the store password, the
// webhook key) and any extra value (a live Redfish session token) is looked
// for in each file before it is written, in its raw form, its JSON-escaped
// form and, for BMC credentials, as the HTTP Basic header value, and
// replaced with "[redacted]". The values never leave this object.
#pragma once

#include <string>
#include <vector>

#include "provisioner/config/fleet_config.h"

namespace kiln::evidence {

class SecretScrubber {
public:
    // Resolves every secret reference of the fleet; one that cannot be
    // resolved now cannot be in anything kiln read either, and is skipped.
    static SecretScrubber from_fleet(const config::Fleet& fleet);

    void add(const std::string& value);
    // The forms of `user:password` an HTTP Basic header carries.
    void add_basic_credentials(const std::string& user, const std::string& password);

    // Replaces every occurrence; the number replaced.
    int scrub(std::string& text) const;
    // Whether any secret occurs in `text` (after scrub: a bug).
    bool leaks(const std::string& text) const;
    size_t size() const { return needles_.size(); }

private:
    std::vector<std::string> needles_;  // longest first, so a secret inside another goes with it
};

}  // namespace kiln::evidence
