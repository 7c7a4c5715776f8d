// The machine's own apt sources, read from /etc/apt/sources.list and
// /etc/apt/sources.list.d/*.{list,sources}: the default mirror of every
// recipe, so no host name is ever written into a recipe or the repository.
#pragma once

#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::images {

struct AptSource {
    std::string uri;
    std::vector<std::string> suites;
    std::vector<std::string> components;
    std::string signed_by;  // keyring path on the machine ("" = apt's default keyrings)
};

// Parses deb822 (.sources) text; only "Types: deb" stanzas, enabled ones.
std::vector<AptSource> parse_deb822_sources(const std::string& text);
// Parses one-line (.list) text: "deb [opts] URI SUITE COMP...".
std::vector<AptSource> parse_one_line_sources(const std::string& text);

// Every source of the machine under `etc_apt` (default /etc/apt).
Result<std::vector<AptSource>> machine_apt_sources(const std::string& etc_apt = "/etc/apt");

// The mirror lines for `suite` ("bookworm" also takes "bookworm-updates" and
// "bookworm-security"), with `components` in place of the machine's: each a
// one-line "deb [signed-by=...] URI SUITE COMP..." as mmdebstrap and
// sources.list take them. `mirror` non-empty overrides the machine's URIs
// with one URI for the suite itself.
Result<std::vector<std::string>> mirror_lines(const std::vector<AptSource>& machine, const std::string& suite,
                                              const std::vector<std::string>& components,
                                              const std::string& mirror = "");

}  // namespace kiln::images
