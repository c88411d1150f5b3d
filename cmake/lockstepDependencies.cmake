# The consumer-time half of lockstep's CMake package, written once for every
# way of getting lockstep: lockstepConfig.cmake includes it (an install or the
# build tree: lockstep::headers is then IMPORTED) and so does the top-level
# CMakeLists.txt (lockstep's own build, add_subdirectory, FetchContent). It
# looks for the optional libraries on the machine where lockstep is *used*, so
# an install made where MPI or CUDA exists still works where they do not.
#
# In:  _lockstep_imported     TRUE from the package config, FALSE from CMakeLists.txt
#      _lockstep_components   the components to look for: mpi, cuda
#      _lockstep_default_gemm LOCKSTEP_GEMM's default (the install's LOCKSTEP_DEFAULT_GEMM)
#      cache, set by the consumer if it likes:
#      LOCKSTEP_GEMM          auto | onednn | blas | builtin: the host GEMM (auto: oneDNN
#                             where found, else a CPU BLAS, OpenBLAS first, else lockstep's
#                             blocked kernel; include/lockstep/backend/host/gemm.hpp says why)
#      LOCKSTEP_USE_ONEDNN, LOCKSTEP_USE_BLAS  (ON) what auto may pick
#      LOCKSTEP_WITH_ZLIB     (ON) link zlib where found, for .gz data files
#      LOCKSTEP_NO_MATH_ERRNO (ON) compile with -fno-math-errno
# Out: lockstep::lockstep; lockstep::mpi and lockstep::cuda where found;
#      lockstep_<component>_FOUND and _lockstep_reason_<component> (why not);
#      LOCKSTEP_GEMM_PATH (onednn, blas or blocked: host::kGemmPath's value);
#      LOCKSTEP_HAVE_ZLIB; _lockstep_errors (a sentence for each thing asked
#      for explicitly and not found; the caller fails with them).

set(_lockstep_errors "")
set(_lockstep_saved_module_path "${CMAKE_MODULE_PATH}")
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")  # FindOneDNN.cmake, FindNCCL.cmake

# A target of this package: lockstep::<name>. An imported one for the package
# config; a real one with an alias for a build, so that lockstep's own
# CMakeLists.txt can install it and tests can link it.
macro(_lockstep_add_target name var)
  if(_lockstep_imported)
    add_library(lockstep::${name} INTERFACE IMPORTED)
    set(${var} lockstep::${name})
  else()
    if("${name}" STREQUAL "lockstep")
      set(${var} lockstep)
    else()
      set(${var} lockstep_${name})
    endif()
    add_library(${${var}} INTERFACE)
    add_library(lockstep::${name} ALIAS ${${var}})
  endif()
endmacro()

if(NOT TARGET lockstep::lockstep)
  set(LOCKSTEP_GEMM "${_lockstep_default_gemm}" CACHE STRING
    "lockstep's host GEMM: auto (oneDNN, else a BLAS, else built-in), onednn, blas or builtin")
  set_property(CACHE LOCKSTEP_GEMM PROPERTY STRINGS auto onednn blas builtin)
  option(LOCKSTEP_WITH_ZLIB "lockstep reads .gz data files through zlib where it is found" ON)
  # Without it GCC and Clang must keep errno for every sqrt and exp, which
  # stops them vectorising the optimizer and loss loops (Adam ran 20% slower
  # per step). lockstep reads no errno; turn it off if your own code does.
  option(LOCKSTEP_NO_MATH_ERRNO "Compile with -fno-math-errno so that math in kernels vectorises" ON)

  _lockstep_add_target(lockstep _lockstep_core)
  target_link_libraries(${_lockstep_core} INTERFACE lockstep::headers)
  if(LOCKSTEP_NO_MATH_ERRNO)
    target_compile_options(${_lockstep_core} INTERFACE $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-fno-math-errno>)
  endif()

  # zlib reads the gzip-compressed data files (*.gz). Without it (or with
  # -DLOCKSTEP_WITH_ZLIB=OFF, or -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON) lockstep
  # reads plain IDX files only, and a gzip file is an Error that says so.
  set(LOCKSTEP_HAVE_ZLIB 0)
  if(LOCKSTEP_WITH_ZLIB)
    find_package(ZLIB QUIET)
    if(ZLIB_FOUND)
      set(LOCKSTEP_HAVE_ZLIB 1)
      target_link_libraries(${_lockstep_core} INTERFACE ZLIB::ZLIB)
    endif()
  endif()
  target_compile_definitions(${_lockstep_core} INTERFACE LOCKSTEP_HAVE_ZLIB=${LOCKSTEP_HAVE_ZLIB})

  # The host GEMM.
  string(TOLOWER "${LOCKSTEP_GEMM}" _lockstep_gemm)
  if(NOT _lockstep_gemm MATCHES "^(auto|onednn|blas|builtin)$")
    list(APPEND _lockstep_errors
      "LOCKSTEP_GEMM is '${LOCKSTEP_GEMM}', expected auto, onednn, blas or builtin")
    set(_lockstep_gemm builtin)
  endif()
  set(_lockstep_try_onednn OFF)
  set(_lockstep_try_blas OFF)
  if(_lockstep_gemm STREQUAL "onednn")
    set(_lockstep_try_onednn ON)
  elseif(_lockstep_gemm STREQUAL "blas")
    set(_lockstep_try_blas ON)
  elseif(_lockstep_gemm STREQUAL "auto")
    if(NOT DEFINED LOCKSTEP_USE_ONEDNN OR LOCKSTEP_USE_ONEDNN)
      set(_lockstep_try_onednn ON)
    endif()
    if(NOT DEFINED LOCKSTEP_USE_BLAS OR LOCKSTEP_USE_BLAS)
      set(_lockstep_try_blas ON)
    endif()
  endif()
  set(LOCKSTEP_GEMM_PATH blocked)
  if(_lockstep_try_onednn)
    find_package(OneDNN QUIET)
    if(OneDNN_FOUND)
      set(LOCKSTEP_GEMM_PATH onednn)
      target_link_libraries(${_lockstep_core} INTERFACE OneDNN::dnnl)
      target_compile_definitions(${_lockstep_core} INTERFACE LOCKSTEP_HAVE_ONEDNN=1)
    elseif(_lockstep_gemm STREQUAL "onednn")
      list(APPEND _lockstep_errors "LOCKSTEP_GEMM=onednn but oneDNN was not found (install libdnnl-dev or set OneDNN_ROOT)")
    endif()
  endif()
  if(_lockstep_try_blas AND LOCKSTEP_GEMM_PATH STREQUAL "blocked")
    # OpenBLAS first: its serial-per-call GEMM lets every replica own its core.
    if(NOT DEFINED BLA_VENDOR)
      set(BLA_VENDOR OpenBLAS)
      find_package(BLAS QUIET)
      unset(BLA_VENDOR)
    endif()
    if(NOT BLAS_FOUND)
      find_package(BLAS QUIET)
    endif()
    if(BLAS_FOUND)
      set(LOCKSTEP_GEMM_PATH blas)
      target_link_libraries(${_lockstep_core} INTERFACE BLAS::BLAS)
      target_compile_definitions(${_lockstep_core} INTERFACE LOCKSTEP_HAVE_BLAS=1)
    elseif(_lockstep_gemm STREQUAL "blas")
      list(APPEND _lockstep_errors "LOCKSTEP_GEMM=blas but no BLAS was found (install libopenblas-dev or set BLA_VENDOR)")
    endif()
  endif()
endif()

# lockstep::mpi: lockstep plus MPI, for MultiWorkerMirroredPolicy<MpiAllReduce> (<lockstep/mpi.hpp>).
foreach(_lockstep_c IN LISTS _lockstep_components)
  if(TARGET lockstep::${_lockstep_c})
    set(lockstep_${_lockstep_c}_FOUND TRUE)
  elseif(_lockstep_c STREQUAL "mpi")
    find_package(MPI COMPONENTS CXX QUIET)
    if(MPI_CXX_FOUND)
      _lockstep_add_target(mpi _lockstep_t)
      target_link_libraries(${_lockstep_t} INTERFACE lockstep::lockstep MPI::MPI_CXX)
      target_compile_definitions(${_lockstep_t} INTERFACE LOCKSTEP_HAVE_MPI=1)
      set(lockstep_mpi_FOUND TRUE)
    else()
      set(lockstep_mpi_FOUND FALSE)
      set(_lockstep_reason_mpi "MPI for C++ not found (install libopenmpi-dev, or set MPI_HOME or MPI_CXX_COMPILER)")
    endif()
  # lockstep::cuda: lockstep plus the CUDA backend (<lockstep/cuda.hpp>, compiled by nvcc).
  elseif(_lockstep_c STREQUAL "cuda")
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      find_package(NCCL QUIET)
    endif()
    if(CUDAToolkit_FOUND AND NCCL_FOUND)
      _lockstep_add_target(cuda _lockstep_t)
      target_link_libraries(${_lockstep_t} INTERFACE lockstep::lockstep CUDA::cudart CUDA::cublas CUDA::cublasLt
                            NCCL::NCCL)
      target_compile_definitions(${_lockstep_t} INTERFACE LOCKSTEP_HAVE_CUDA=1)
      set(lockstep_cuda_FOUND TRUE)
      # cuDNN, optional, for Conv2D on GPUs (backend/cuda/conv.cuh): without
      # it a convnet on the CUDA backend is a compile-time sentence.
      find_package(CUDNN 8 QUIET)
      if(CUDNN_FOUND)
        target_link_libraries(${_lockstep_t} INTERFACE CUDNN::CUDNN)
        target_compile_definitions(${_lockstep_t} INTERFACE LOCKSTEP_HAVE_CUDNN=1)
        if(NOT _lockstep_imported)
          message(STATUS "lockstep: cuDNN ${CUDNN_VERSION} found (${CUDNN_LIBRARY}): Conv2D runs on GPUs")
        endif()
      elseif(NOT _lockstep_imported)
        message(STATUS "lockstep: cuDNN not found: no Conv2D on the CUDA backend (install cuDNN, or set CUDNN_ROOT "
                       "to NVIDIA's wheel, site-packages/nvidia/cudnn)")
      endif()
    else()
      set(lockstep_cuda_FOUND FALSE)
      if(NOT CUDAToolkit_FOUND)
        set(_lockstep_reason_cuda "the CUDA toolkit was not found (put nvcc on PATH or set CUDAToolkit_ROOT)")
      else()
        set(_lockstep_reason_cuda "NCCL was not found next to CUDA ${CUDAToolkit_VERSION} (set NCCL_ROOT)")
      endif()
    endif()
  else()
    set(lockstep_${_lockstep_c}_FOUND FALSE)
    set(_lockstep_reason_${_lockstep_c} "lockstep has no component '${_lockstep_c}': its components are mpi and cuda")
  endif()
endforeach()

set(CMAKE_MODULE_PATH "${_lockstep_saved_module_path}")
unset(_lockstep_saved_module_path)
unset(_lockstep_c)
unset(_lockstep_t)
unset(_lockstep_core)
unset(_lockstep_gemm)
unset(_lockstep_try_onednn)
unset(_lockstep_try_blas)
