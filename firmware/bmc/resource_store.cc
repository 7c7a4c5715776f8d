#include "firmware/bmc/resource_store.h"

#include "provisioner/core/sha256.h"

namespace kiln::bmc {

std::string content_etag(const nlohmann::json& body) {
    const std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return "\"" + sha256_hex(text).substr(0, 16) + "\"";
}

ResourceStore::ResourceStore(const MockupTree& tree)
    : documents_(std::make_shared<const std::map<std::string, std::string>>(tree.documents)) {
    for (const auto& [uri, captured] : tree.resources) {
        Resource r;
        nlohmann::json body = captured;
        if (body.contains("@odata.etag")) {
            r.odata_etag = true;
            body.erase("@odata.etag");
        }
        r.etag = content_etag(body);
        r.body = std::make_shared<const nlohmann::json>(std::move(body));
        resources_.emplace(uri, std::move(r));
        index(uri);
    }
}

void ResourceStore::index(const std::string& uri) {
    by_lower_.emplace(lower_ascii(uri), uri);
}

std::optional<std::string> ResourceStore::resolve(const std::string& uri) const {
    const std::string n = normalize_uri(uri);
    if (resources_.count(n)) return n;
    auto it = by_lower_.find(lower_ascii(n));
    if (it != by_lower_.end()) return it->second;
    return std::nullopt;
}

std::optional<std::string> ResourceStore::resolve_document(const std::string& uri) const {
    const std::string n = normalize_uri(uri);
    if (documents_->count(n)) return n;
    for (const auto& [key, text] : *documents_) {
        if (lower_ascii(key) == lower_ascii(n)) return key;
    }
    return std::nullopt;
}

const nlohmann::json& ResourceStore::body(const std::string& uri) const {
    return *resources_.at(uri).body;
}

const std::string& ResourceStore::etag(const std::string& uri) const {
    return resources_.at(uri).etag;
}

nlohmann::json ResourceStore::view(const std::string& uri) const {
    const Resource& r = resources_.at(uri);
    nlohmann::json out = *r.body;
    if (r.odata_etag) out["@odata.etag"] = r.etag;
    return out;
}

const std::string& ResourceStore::document(const std::string& uri) const {
    return documents_->at(uri);
}

void ResourceStore::replace(const std::string& uri, nlohmann::json body) {
    auto it = resources_.find(uri);
    if (it == resources_.end()) {
        it = resources_.emplace(uri, Resource{}).first;
        index(uri);
    }
    body.erase("@odata.etag");
    it->second.etag = content_etag(body);
    it->second.body = std::make_shared<const nlohmann::json>(std::move(body));
    changed_.insert(uri);
}

void ResourceStore::seed(const std::string& uri, nlohmann::json body) {
    const bool was_changed = changed_.count(uri) > 0;
    replace(uri, std::move(body));
    if (!was_changed) changed_.erase(uri);
}

void ResourceStore::erase(const std::string& uri) {
    resources_.erase(uri);
    changed_.erase(uri);
    by_lower_.erase(lower_ascii(uri));
}

std::map<std::string, nlohmann::json> ResourceStore::changed() const {
    std::map<std::string, nlohmann::json> out;
    for (const auto& uri : changed_) out[uri] = *resources_.at(uri).body;
    return out;
}

std::set<std::string> ResourceStore::uris() const {
    std::set<std::string> out;
    for (const auto& [uri, r] : resources_) out.insert(uri);
    return out;
}

}  // namespace kiln::bmc
