#include "firmware/redfish/session_pool.h"

namespace kiln::redfish {

SessionPool::~SessionPool() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, s] : sessions_) s->logout();
    sessions_.clear();
}

std::shared_ptr<BmcSession> SessionPool::acquire(const Endpoint& endpoint) {
    std::string key = endpoint.url + "\n" + endpoint.user;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(key);
    if (it != sessions_.end()) {
        const Endpoint& e = it->second->endpoint();
        if (e.password == endpoint.password && e.tls.verify == endpoint.tls.verify &&
            e.tls.ca_bundle == endpoint.tls.ca_bundle && e.tls.pinned_sha256 == endpoint.tls.pinned_sha256)
            return it->second;
        it->second->logout();
    }
    auto s = std::make_shared<BmcSession>(http_, endpoint, options_);
    sessions_[key] = s;
    return s;
}

size_t SessionPool::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.size();
}

}  // namespace kiln::redfish
