#include "provisioner/journal/open_store.h"

#include "provisioner/journal/sqlite_store.h"

namespace kiln::journal {

namespace {

PgOptions pg_options(const StoreSpec& spec, bool read_only) {
    PgOptions o;
    o.read_only = read_only;
    o.password = spec.password;
    if (spec.reconnect_for) o.reconnect_for = *spec.reconnect_for;
    return o;
}

}  // namespace

Result<std::unique_ptr<Store>> open_store(const StoreSpec& spec) {
    if (spec.postgres()) return open_pg_store(spec.url, pg_options(spec, false));
    return open_sqlite_store(spec.sqlite_path, {});
}

Result<std::unique_ptr<Store>> open_store_reader(const StoreSpec& spec) {
    auto r = spec.postgres() ? open_pg_store(spec.url, pg_options(spec, true))
                             : open_sqlite_store(spec.sqlite_path, {.read_only = true});
    if (!r && r.error().code == "journal.missing") return std::unique_ptr<Store>();
    return r;
}

Result<RunGuard> RunGuard::acquire(const StoreSpec& spec) {
    if (spec.postgres()) {
        auto l = PgRunLock::acquire(spec.url, pg_options(spec, false));
        if (!l) return l.error();
        return RunGuard(std::move(*l));
    }
    auto l = RunLock::acquire(spec.sqlite_path);
    if (!l) return l.error();
    return RunGuard(std::move(*l));
}

bool RunGuard::held(const StoreSpec& spec) {
    if (!spec.postgres()) return RunLock::held(spec.sqlite_path);
    auto h = PgRunLock::held(spec.url, pg_options(spec, true));
    return h && *h;
}

}  // namespace kiln::journal
