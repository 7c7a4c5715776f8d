#include "provisioner/cli/app.h"
#include "provisioner/cli/product_stages.h"

int main(int argc, char** argv) {
    kiln::engine::StageRegistry registry;
    kiln::engine::register_product_stages(registry);
    return kiln::cli::run_cli(argc, argv, registry);
}
