#include "network/sonic/libyang_raii.h"

#include <libyang/libyang.h>

namespace kiln::network::sonic {

// libyang 2.1.30 warns "String ... not freed" at destroy, harmlessly (the
// models' README says so); with errors stored, not printed, it stays quiet.
void LyContextDeleter::operator()(ly_ctx* ctx) const noexcept {
    ly_ctx_destroy(ctx);
}

void LydTreeDeleter::operator()(lyd_node* tree) const noexcept {
    lyd_free_all(tree);
}

void ly_store_errors_quietly() {
    static const bool once = [] {
        ly_log_options(LY_LOSTORE);
        return true;
    }();
    (void)once;
}

}  // namespace kiln::network::sonic
