// The PostgreSQL store's URL: recognised, checked and shown without a
// password. Kept free of libpq so the fleet loader (and its fuzzer) can use it.
#pragma once

#include <string>

#include "provisioner/core/result.h"

namespace kiln::journal {

// True for "postgresql://..." and "postgres://..." (libpq's URI forms).
bool is_postgres_url(const std::string& url);

// The URL with any password replaced by "***", for messages about a URL
// that was refused for carrying one.
std::string redact_store_url(const std::string& url);

// Refuses a URL that is not postgresql:// or that carries a password (in the
// user info or as a `password=` parameter); the message shows it redacted.
Status check_store_url(const std::string& url);

}  // namespace kiln::journal
