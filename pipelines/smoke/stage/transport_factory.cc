#include "pipelines/smoke/stage/transport_factory.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "pipelines/smoke/stage/guest_agent_transport.h"
#include "pipelines/smoke/stage/local_process_transport.h"

namespace kiln::smoke {

namespace {
std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}
int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    return *end == '\0' && n > 0 && n < 65536 ? static_cast<int>(n) : fallback;
}
}  // namespace

std::shared_ptr<SmokeTransport> default_transport() {
    if (env_or("KILN_SMOKE_TRANSPORT", "") == "local") {
        std::error_code ec;
        auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
        LocalProcessOptions o;
        o.smoke_binary = env_or("KILN_SMOKE_BINARY", (self.parent_path() / "kiln-smoke").string());
        o.vms_per_node = env_int("KILN_SMOKE_LOCAL_VMS", 2);
        o.port_base = env_int("KILN_SMOKE_PORT_BASE", 29600);
        return std::make_shared<LocalProcessTransport>(o);
    }
    GuestAgentOptions o;
    o.uri = env_or("KILN_LIBVIRT_URI", "qemu:///system");
    return std::make_shared<GuestAgentTransport>(o);
}

}  // namespace kiln::smoke
