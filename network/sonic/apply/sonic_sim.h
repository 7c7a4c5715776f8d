// The emulated SONiC target behind kiln-sonic-sim: CONFIG_DB in a JSON state
// file, and the commands kiln's SonicDriver runs, with SONiC's semantics:
//
//   config apply-patch FILE      FILE may be "-" or /dev/stdin. The RFC 6902
//                                patch is applied to a copy, the result is
//                                validated whole with the real SONiC YANG
//                                models (YangValidator) and only then committed
//                                (write to a temp file, fsync, rename).
//                                A failing op or YANG issue: exit 1, nothing
//                                changed, stderr names the table/key/field.
//   config checkpoint NAME       copy of the running config
//   config rollback NAME         the checkpoint becomes the running config
//   config delete-checkpoint NAME
//   config list-checkpoints      JSON array of names
//   sonic-cfggen -d --print-data the running config as JSON
//   cat /usr/share/sonic/device/P/H/F   a SKU file, from DIR/device/P/H/F
//                                (tests/fixtures/network/sonic-device)
//
// apply-patch also refuses what SONiC's config updater refuses before YANG:
// a change to a create-only field (PORT lanes).
//
// A leading "sudo" is accepted and dropped. State dir layout:
//   DIR/config_db.json  DIR/checkpoints/NAME.json  DIR/lock (flock: one command at a time)
//   DIR/device/<platform>/<hwsku>/...  the SKU files `cat` serves
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "network/sonic/yang_validator.h"

namespace kiln::network::sonic {

class SonicSim {
public:
    // `validator` must outlive the sim.
    SonicSim(std::string state_dir, const YangValidator& validator);

    // Runs one command line; returns the exit status SONiC's CLI would.
    int run(std::vector<std::string> args, std::istream& in, std::ostream& out, std::ostream& err);

private:
    int apply_patch(const std::string& file, std::istream& in, std::ostream& out, std::ostream& err);
    int checkpoint(const std::string& name, std::ostream& out, std::ostream& err);
    int rollback(const std::string& name, std::ostream& out, std::ostream& err);
    int delete_checkpoint(const std::string& name, std::ostream& out, std::ostream& err);
    int list_checkpoints(std::ostream& out);
    int print_data(std::ostream& out, std::ostream& err);
    int cat_device_file(const std::string& path, std::ostream& out, std::ostream& err);

    std::string state_dir_;
    const YangValidator& validator_;
};

// Splits SSH_ORIGINAL_COMMAND on spaces (what the driver sends holds only safe tokens).
std::vector<std::string> split_command_line(const std::string& line);

}  // namespace kiln::network::sonic
