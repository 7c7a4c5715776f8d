// Move-only owners for libyang's C handles, and the logging mode kiln uses.
#pragma once

#include <memory>

struct ly_ctx;
struct lyd_node;

namespace kiln::network::sonic {

struct LyContextDeleter {
    void operator()(ly_ctx* ctx) const noexcept;
};
using LyContext = std::unique_ptr<ly_ctx, LyContextDeleter>;

struct LydTreeDeleter {
    void operator()(lyd_node* tree) const noexcept;
};
using LydTree = std::unique_ptr<lyd_node, LydTreeDeleter>;

// Makes libyang store its messages in the context (read with ly_err_first)
// and never print them: kiln reports them itself, with CONFIG_DB names.
// Process-wide and idempotent. A scoped, thread-local switch
// (ly_temp_log_options) does not hold: libyang's own union type code sets
// and then clears that pointer while it stores a value.
void ly_store_errors_quietly();

}  // namespace kiln::network::sonic
