# ctest fixture gpu_guest_lite_image: builds images/recipes/gpu-guest-lite.toml
# into ${KILN_BINARY_DIR}/test-images/gpu-guest-lite.qcow2 through `kiln image
# build`, with the layer cache KILN_IMAGE_CACHE (shared across build trees).
# The smoke binary is build/kiln-smoke when it exists, else a placeholder.
if(EXISTS "${KILN_BINARY_DIR}/kiln-smoke")
  set(smoke "${KILN_BINARY_DIR}/kiln-smoke")
else()
  set(smoke "${KILN_SOURCE_DIR}/tests/images/fixtures/kiln-smoke-placeholder")
endif()
set(ENV{LIBGUESTFS_BACKEND} direct)
if(NOT DEFINED ENV{LIBGUESTFS_BACKEND_SETTINGS})
  set(ENV{LIBGUESTFS_BACKEND_SETTINGS} force_tcg)
endif()
execute_process(
  COMMAND "${KILN}" image build "${KILN_SOURCE_DIR}/images/recipes/gpu-guest-lite.toml"
          --cache "${KILN_IMAGE_CACHE}"
          --output "${KILN_BINARY_DIR}/test-images/gpu-guest-lite.qcow2"
          --input "kiln-smoke=${smoke}" --json
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln image build gpu-guest-lite failed (${rc})")
endif()
