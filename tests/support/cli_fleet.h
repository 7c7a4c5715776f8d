// A small fleet on disk for tests that run the CLI as a child process: the
// test driver's ledger stages in a `test-node` pipeline and a `reimage` one.
#pragma once

#include <string>

#include "tests/support/temp_dir.h"

namespace kiln::test {

inline std::string write_cli_fleet(const TempDir& dir, int nodes, const std::string& limits = "parallel = 2") {
    dir.write("pipelines/test-node.toml",
              "schema = 1\nname = \"test-node\"\ndescription = \"test stages\"\n"
              "stages = [\"alpha\", \"beta\", \"gamma\", \"t-handover\"]\n");
    dir.write("pipelines/reimage.toml",
              "schema = 1\nname = \"reimage\"\nstages = [\"beta\", \"gamma\", \"t-handover\"]\n");
    std::string toml = "schema = 1\n\n[fleet]\nname = \"clitest\"\npipelines = \"pipelines\"\n\n[limits]\n" + limits +
                       "\nbackoff_initial = \"10ms\"\nbackoff_max = \"20ms\"\n\n"
                       "[[racks]]\nname = \"r1\"\n\n[[racks]]\nname = \"r2\"\n";
    for (int i = 1; i <= nodes; ++i) {
        toml += "\n[[nodes]]\nname = \"n" + std::to_string(i) + "\"\nrack = \"r" + std::to_string(1 + i % 2) +
                "\"\nrole = \"test-node\"\nbmc = { url = \"https://127.0.0.1:" + std::to_string(9000 + i) +
                "\", username = \"root\", password = \"env:KILN_TEST_BMC_PASSWORD\" }\n";
    }
    return dir.write("fleet.toml", toml);
}

}  // namespace kiln::test
