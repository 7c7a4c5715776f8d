// The resources of one emulated BMC, keyed by URI, each with an ETag that is
// a hash of its content (so it changes whenever the content does). Lookups
// forgive a trailing slash and letter case, as iLO and iDRAC do, because
// vendor trees link to "/redfish/v1/systems/1/bios/" while their folders
// say "Systems/1/bios". Tracks which resources changed since the mockup,
// which is what the state file keeps.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "firmware/bmc/mockup_tree.h"

namespace kiln::bmc {

class ResourceStore {
public:
    explicit ResourceStore(const MockupTree& tree);

    // The canonical URI of the resource `uri` names, if any.
    std::optional<std::string> resolve(const std::string& uri) const;
    std::optional<std::string> resolve_document(const std::string& uri) const;

    // `uri` must be canonical (from resolve()).
    const nlohmann::json& body(const std::string& uri) const;
    const std::string& etag(const std::string& uri) const;  // quoted, strong: "\"3f2a...\""
    // What GET returns: the body, with @odata.etag kept in step with the ETag
    // header where the mockup carried one.
    nlohmann::json view(const std::string& uri) const;
    const std::string& document(const std::string& uri) const;

    // Replaces a resource's body (a PATCH, a reset); the ETag follows.
    void replace(const std::string& uri, nlohmann::json body);
    // Replaces a body as if the mockup had it (what the emulator adds to a
    // tree at start: not a change the state file keeps).
    void seed(const std::string& uri, nlohmann::json body);
    // Drops a resource from the tree (the mockup's captured sessions).
    void erase(const std::string& uri);

    std::map<std::string, nlohmann::json> changed() const;
    std::set<std::string> uris() const;

private:
    // Bodies are shared between copies of a store until one replaces its
    // own: a process serving thousands of BMCs from one mockup holds each
    // body once (BmcState::prepare copies one store for every BMC).
    struct Resource {
        std::shared_ptr<const nlohmann::json> body;  // without @odata.etag
        std::string etag;
        bool odata_etag = false;  // the mockup's body carried @odata.etag
    };
    void index(const std::string& uri);

    std::map<std::string, Resource> resources_;
    std::map<std::string, std::string> by_lower_;  // lower-case URI -> canonical
    std::shared_ptr<const std::map<std::string, std::string>> documents_;
    std::set<std::string> changed_;
};

// "\"<16 hex of sha256>\"" over the compact serialisation.
std::string content_etag(const nlohmann::json& body);

}  // namespace kiln::bmc
