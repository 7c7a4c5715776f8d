// A self-signed certificate for kiln-bmc's HTTPS (--tls-generate DIR), as a
// real BMC ships one: EC P-256, SAN for the bind address, 127.0.0.1 and
// localhost. Kept in DIR and reused at the next start, so a client that
// pinned its fingerprint (kiln's per-BMC pinned_sha256) keeps working.
#pragma once

#include <string>

#include "provisioner/core/result.h"

namespace kiln::bmc {

struct TlsFiles {
    std::string cert_file;    // DIR/kiln-bmc-cert.pem
    std::string key_file;     // DIR/kiln-bmc-key.pem (0600)
    std::string fingerprint;  // lowercase hex SHA-256 of the certificate (DER)
};

// Errors (domain "bmc"): "bmc.tls_generate_failed", "bmc.tls_unreadable".
Result<TlsFiles> ensure_self_signed(const std::string& dir, const std::string& bind_address);

// Lowercase hex SHA-256 of the first certificate in a PEM file.
Result<std::string> certificate_fingerprint(const std::string& cert_file);

}  // namespace kiln::bmc
