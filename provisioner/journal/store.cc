#include "provisioner/journal/store.h"

namespace kiln::journal {

Status Store::put_record(const NodeRecord& record) {
    return make_error("journal", "journal.unsupported",
                      "this journal cannot keep records: the " + record.kind + " record of " + record.node);
}

Result<std::optional<NodeRecord>> Store::latest_record(const std::string& node, const std::string& kind) {
    return make_error("journal", "journal.unsupported",
                      "this journal cannot read records: the " + kind + " of " + node);
}

}  // namespace kiln::journal
