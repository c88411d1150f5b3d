# FindOneDNN: oneDNN (Debian's libdnnl-dev), used for its row-major dnnl_sgemm.
# Looks in OneDNN_ROOT / DNNL_ROOT, then the system paths. Defines
# OneDNN_FOUND, OneDNN_VERSION and the imported target OneDNN::dnnl.
# oneDNN's own dnnl-config.cmake is not used: Debian's build also has a GPU
# runtime, and its config file then requires OpenCL's development files,
# which a CPU-only user of the GEMM has no use for.
find_path(OneDNN_INCLUDE_DIR dnnl.h HINTS ${OneDNN_ROOT} ENV OneDNN_ROOT ENV DNNL_ROOT PATH_SUFFIXES include)
find_library(OneDNN_LIBRARY dnnl HINTS ${OneDNN_ROOT} ENV OneDNN_ROOT ENV DNNL_ROOT PATH_SUFFIXES lib lib64)
if(OneDNN_INCLUDE_DIR AND EXISTS "${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h")
  file(STRINGS "${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _onednn_version_lines
    REGEX "^#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define DNNL_VERSION_${_part} ([0-9]+).*" "\\1" OneDNN_${_part} "${_onednn_version_lines}")
  endforeach()
  set(OneDNN_VERSION "${OneDNN_MAJOR}.${OneDNN_MINOR}.${OneDNN_PATCH}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OneDNN REQUIRED_VARS OneDNN_LIBRARY OneDNN_INCLUDE_DIR VERSION_VAR OneDNN_VERSION)
if(OneDNN_FOUND AND NOT TARGET OneDNN::dnnl)
  add_library(OneDNN::dnnl UNKNOWN IMPORTED)
  set_target_properties(OneDNN::dnnl PROPERTIES IMPORTED_LOCATION "${OneDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${OneDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(OneDNN_INCLUDE_DIR OneDNN_LIBRARY)
