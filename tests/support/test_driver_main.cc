// `kiln` with test-only stages: the crash-safety and CLI tests run it as a
// child process so that kills, exit codes and output are real.
#include "provisioner/cli/app.h"
#include "provisioner/cli/product_stages.h"
#include "tests/support/test_stages.h"

int main(int argc, char** argv) {
    kiln::engine::StageRegistry registry;
    kiln::engine::register_product_stages(registry);
    kiln::test::register_driver_stages(registry);
    return kiln::cli::run_cli(argc, argv, registry);
}
