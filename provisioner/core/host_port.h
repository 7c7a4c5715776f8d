// "HOST:PORT" as the listeners take it (--listen, --metrics-listen, the
// artifact server's listen): one parser, so every flag refuses the same
// input ("8080", "host:", "host:80x", "host:70000") the same way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln {

struct HostPort {
    std::string host;  // as given, without brackets; may be empty (":8080")
    int port = 0;      // 0..65535
};

// The last ':' splits host from port; the port is all digits, 0..65535.
// nullopt otherwise. "[::1]:80" gives host "::1".
std::optional<HostPort> parse_host_port(std::string_view text);

// A dotted IPv4 address (inet_pton's rules), as the IPv4-only listeners need.
bool is_ipv4(const std::string& host);

}  // namespace kiln
