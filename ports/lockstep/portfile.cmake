# vcpkg overlay port of lockstep, header-only:
#   vcpkg install lockstep[mpi,openblas] --overlay-ports=<lockstep checkout>/ports
# It builds the checkout it sits in. A port in a registry would take a release
# instead: vcpkg_from_github(OUT_SOURCE_PATH SOURCE_PATH REPO <owner>/lockstep
# REF "v${VERSION}" SHA512 <the release tarball's>). tests/cmake_import/check.cmake
# (MODE vcpkg_port) runs this file with stand-ins for vcpkg's helpers.
set(VCPKG_BUILD_TYPE release)  # header-only: one configuration
get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)

# Features choose what vcpkg installs beside lockstep; lockstep's package looks
# for it when a consumer configures. The GEMM feature also becomes the GEMM a
# consumer gets unless it sets LOCKSTEP_GEMM: oneDNN, else OpenBLAS, else
# lockstep's own kernel (never a library from outside vcpkg).
if("onednn" IN_LIST FEATURES)
  set(gemm onednn)
elseif("openblas" IN_LIST FEATURES)
  set(gemm blas)
else()
  set(gemm builtin)
endif()

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    -DLOCKSTEP_BUILD_TESTS=OFF
    -DLOCKSTEP_BUILD_EXAMPLES=OFF
    -DLOCKSTEP_BUILD_BENCHMARKS=OFF
    -DLOCKSTEP_INSTALL=ON
    -DLOCKSTEP_DEFAULT_GEMM=${gemm}
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH share/cmake/lockstep)
vcpkg_fixup_pkgconfig()

file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/share/doc")  # the license goes to share/lockstep/copyright
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
