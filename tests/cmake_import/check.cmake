# Consumer tests of lockstep's packaging: each MODE gets lockstep one way a
# downstream project would, configures and builds the project in this folder
# (CMakeLists.txt, main.cpp) with nested cmake runs, and runs what it built.
# tests/CMakeLists.txt registers one ctest per MODE (label packaging):
#   build_tree      find_package against lockstep's build folder, MPI and CUDA hidden, LOCKSTEP_GEMM=builtin
#   install_hidden  a fresh configure with doctest hidden installs lockstep; find_package against
#                   the install, MPI and CUDA hidden (a REQUIRED mpi must then fail, saying why);
#                   pkg-config's lockstep.pc compiles the same program
#   install_found   find_package(... COMPONENTS mpi) against an install of BUILD_DIR, run under mpirun
#   subdirectory    add_subdirectory, the consumer's code under strict warnings
#   fetchcontent    FetchContent from a file:// URL of a tarball of the source tree
#   readme          README.md's first ```cpp block, compiled
#   conan           conan create (Conan's test_package), skipped where CONAN is not given
#   vcpkg_port      ports/lockstep/portfile.cmake with stand-ins for vcpkg's helpers (FEATURES=a,b)
#   versions        vcpkg.json and CHANGELOG.md name the version of version.hpp (FULL_VERSION)
# Run as: cmake -DMODE=.. -DSOURCE_DIR=<repo> -DBUILD_DIR=<build> -DWORK_DIR=<scratch>
#   -DGENERATOR=.. -DCXX=<compiler> -DVERSION=<major.minor> -DEXPECT_GEMM_PATH=<the build's> [-DEXPECT_CUDA=ON|OFF]
#   [-DMPIEXEC=.. -DMPIFLAGS=..] -P check.cmake
cmake_minimum_required(VERSION 3.21)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
string(TIMESTAMP start "%s")

# Runs one step and prints how long it took; stops the test with the step's
# output when it failed, or, with EXPECT_FAIL <regex>, when it did not fail so.
function(step name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "EXPECT_FAIL;WORKING_DIRECTORY" "COMMAND")
  if(NOT arg_WORKING_DIRECTORY)
    set(arg_WORKING_DIRECTORY ${WORK_DIR})
  endif()
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${arg_COMMAND} WORKING_DIRECTORY ${arg_WORKING_DIRECTORY}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(TIMESTAMP t1 "%s")
  math(EXPR seconds "${t1} - ${t0}")
  string(REPLACE ";" " " shown "${arg_COMMAND}")
  if(arg_EXPECT_FAIL)
    if(rc EQUAL 0 OR NOT out MATCHES "${arg_EXPECT_FAIL}")
      message(FATAL_ERROR "${name}: expected a failure saying '${arg_EXPECT_FAIL}', got exit ${rc}:\n${shown}\n${out}")
    endif()
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (exit ${rc}):\n${shown}\n${out}")
  endif()
  message("${name}: ${seconds} s")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(consumer -S ${SOURCE_DIR}/tests/cmake_import -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DLOCKSTEP_REQUEST_VERSION=${VERSION})
set(hidden -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
    -DCMAKE_DISABLE_FIND_PACKAGE_NCCL=ON -DLOCKSTEP_OPTIONAL=mpi,cuda -DEXPECT_MPI=OFF -DEXPECT_CUDA=OFF)

# Configures the consumer in WORK_DIR/<dir> with the arguments given, builds
# it and runs its program.
function(consumer_builds_and_runs dir)
  step("configure the consumer (${dir})" COMMAND ${CMAKE_COMMAND} ${consumer} -B ${WORK_DIR}/${dir} ${ARGN})
  set(configure_output "${step_output}" PARENT_SCOPE)
  step("build the consumer (${dir})" COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/${dir})
  step("run the consumer (${dir})" COMMAND ${WORK_DIR}/${dir}/consumer)
  message("  ${step_output}")
  set(run_output "${step_output}" PARENT_SCOPE)
endfunction()

# The host GEMM the consumer's program was compiled with (host::kGemmPath).
function(expect_gemm output path)
  if(NOT output MATCHES "gemm=${path} ")
    message(FATAL_ERROR "expected the consumer to run the ${path} GEMM, it printed: ${output}")
  endif()
endfunction()

if(MODE STREQUAL "build_tree")
  # LOCKSTEP_GEMM is the consumer's choice: builtin here, whatever the build found.
  consumer_builds_and_runs(consumer -Dlockstep_DIR=${BUILD_DIR} ${hidden} -DLOCKSTEP_GEMM=builtin)
  expect_gemm("${run_output}" blocked)

elseif(MODE STREQUAL "install_hidden")
  set(prefix ${WORK_DIR}/prefix)
  step("configure lockstep with doctest hidden" COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/lockstep
    -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_DISABLE_FIND_PACKAGE_doctest=ON
    -DLOCKSTEP_BUILD_EXAMPLES=OFF -DLOCKSTEP_BUILD_BENCHMARKS=OFF -DCMAKE_INSTALL_PREFIX=${prefix})
  if(NOT step_output MATCHES "doctest not found, tests off")
    message(FATAL_ERROR "lockstep's configure without doctest did not say that the tests are off:\n${step_output}")
  endif()
  step("install lockstep" COMMAND ${CMAKE_COMMAND} --install ${WORK_DIR}/lockstep)
  consumer_builds_and_runs(consumer -DCMAKE_PREFIX_PATH=${prefix} ${hidden})
  expect_gemm("${run_output}" ${EXPECT_GEMM_PATH})  # auto: the same choice as lockstep's own build
  if(NOT configure_output MATCHES "consumer: lockstep [0-9.]+ from ${prefix}/share/cmake/lockstep")
    message(FATAL_ERROR "the consumer did not find the install in ${prefix}:\n${configure_output}")
  endif()
  step("a REQUIRED mpi component without MPI fails, saying why" COMMAND ${CMAKE_COMMAND} ${consumer}
    -B ${WORK_DIR}/consumer_required -DCMAKE_PREFIX_PATH=${prefix} ${hidden} -DLOCKSTEP_REQUIRE=mpi
    EXPECT_FAIL "component mpi: MPI for C\\+\\+ not found")
  # pkg-config: lockstep.pc gives the headers and threads; zlib's own .pc the rest.
  find_program(PKG_CONFIG pkg-config)
  file(GLOB_RECURSE pc_file ${prefix}/lockstep.pc)
  if(NOT pc_file)
    message(FATAL_ERROR "the install has no lockstep.pc")
  endif()
  if(PKG_CONFIG)
    get_filename_component(pc_dir ${pc_file} DIRECTORY)
    set(env ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pc_dir})
    step("pkg-config --modversion lockstep" COMMAND ${env} ${PKG_CONFIG} --modversion lockstep)
    string(STRIP "${step_output}" pc_version)
    if(NOT pc_version MATCHES "^${VERSION}\\.[0-9]+$")
      message(FATAL_ERROR "lockstep.pc says version '${pc_version}', expected ${VERSION}.x")
    endif()
    step("pkg-config --cflags --libs lockstep zlib" COMMAND ${env} ${PKG_CONFIG} --cflags --libs lockstep zlib)
    string(STRIP "${step_output}" pc_flags)
    separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
    step("compile with pkg-config's flags" COMMAND ${CXX} -std=c++17 ${SOURCE_DIR}/tests/cmake_import/main.cpp
      ${pc_flags} -o ${WORK_DIR}/pkg_config_consumer)
    step("run the pkg-config consumer" COMMAND ${WORK_DIR}/pkg_config_consumer)
    expect_gemm("${step_output}" blocked)  # lockstep.pc names no GEMM library
  else()
    message("pkg-config not found: lockstep.pc not checked")
  endif()

elseif(MODE STREQUAL "install_found")
  set(prefix ${WORK_DIR}/prefix)
  step("install lockstep from ${BUILD_DIR}" COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
  consumer_builds_and_runs(consumer -DCMAKE_PREFIX_PATH=${prefix} -DLOCKSTEP_REQUIRE=mpi -DLOCKSTEP_OPTIONAL=cuda
    -DEXPECT_MPI=ON -DEXPECT_CUDA=${EXPECT_CUDA})
  separate_arguments(flags UNIX_COMMAND "${MPIFLAGS}")
  step("mpirun -np 2 the lockstep::mpi consumer" COMMAND ${MPIEXEC} ${flags} -np 2 ${WORK_DIR}/consumer/consumer_mpi)

elseif(MODE STREQUAL "subdirectory")
  consumer_builds_and_runs(consumer -DLOCKSTEP_VIA=subdirectory -DLOCKSTEP_SOURCE_DIR=${SOURCE_DIR} -DSTRICT=ON)

elseif(MODE STREQUAL "fetchcontent")
  # The tree as a clone would have it plus everyone's uncommitted changes:
  # the files git tracks or would track, those that still exist.
  find_package(Git QUIET)
  set(files "")
  if(GIT_FOUND AND EXISTS ${SOURCE_DIR}/.git)
    execute_process(COMMAND ${GIT_EXECUTABLE} ls-files --cached --others --exclude-standard
      WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE listed RESULT_VARIABLE rc)
    if(rc EQUAL 0)
      string(REPLACE "\n" ";" listed "${listed}")
      foreach(f IN LISTS listed)
        if(EXISTS ${SOURCE_DIR}/${f} AND NOT IS_DIRECTORY ${SOURCE_DIR}/${f})
          string(APPEND files "${f}\n")
        endif()
      endforeach()
    endif()
  endif()
  if(files STREQUAL "")  # not a git checkout: what a release tarball holds
    file(GLOB_RECURSE globbed RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/include/* ${SOURCE_DIR}/cmake/*)
    list(APPEND globbed CMakeLists.txt LICENSE)
    list(JOIN globbed "\n" files)
  endif()
  file(WRITE ${WORK_DIR}/files.txt "${files}")
  step("tar the source tree" COMMAND ${CMAKE_COMMAND} -E tar czf ${WORK_DIR}/lockstep.tar.gz
    --files-from=${WORK_DIR}/files.txt WORKING_DIRECTORY ${SOURCE_DIR})
  file(SHA256 ${WORK_DIR}/lockstep.tar.gz sha)
  consumer_builds_and_runs(consumer -DLOCKSTEP_VIA=fetchcontent -DLOCKSTEP_URL=file://${WORK_DIR}/lockstep.tar.gz
    -DLOCKSTEP_URL_SHA256=${sha})

elseif(MODE STREQUAL "readme")
  # The first ```cpp block of README.md, made a program: its #include lines at
  # the top, the rest in main(), after a `flags` with the fields the README
  # names (the example's command line). A block with its own main() is kept whole.
  file(READ ${SOURCE_DIR}/README.md readme)
  string(FIND "${readme}" "```cpp\n" begin)
  if(begin EQUAL -1)
    message(FATAL_ERROR "README.md has no ```cpp block")
  endif()
  math(EXPR begin "${begin} + 7")
  string(SUBSTRING "${readme}" ${begin} -1 rest)
  string(FIND "${rest}" "```" end)
  string(SUBSTRING "${rest}" 0 ${end} block)
  if(block MATCHES "int main\\(")
    set(program "${block}")
  else()
    string(REGEX MATCHALL "#include[^\n]*\n" includes "${block}")
    string(REGEX REPLACE "#include[^\n]*\n" "" body "${block}")
    string(REPLACE ";" "" includes "${includes}")
    set(program "// Generated by tests/cmake_import/check.cmake from README.md's first program.\n${includes}
#include <cstdint>
#include <string>
struct {
  std::string data = lockstep::fashion_mnist_dir();
  int replicas = 2;
  int epochs = 1;
  std::size_t batch_size = 128;
  std::uint64_t seed = 0;
} flags;

int main() {
${body}
  return 0;
}
")
  endif()
  file(WRITE ${WORK_DIR}/readme_first_program.cpp "${program}")
  step("compile README.md's first program" COMMAND ${CXX} -std=c++17 -fsyntax-only -I${SOURCE_DIR}/include
    ${WORK_DIR}/readme_first_program.cpp)

elseif(MODE STREQUAL "vcpkg_port")
  # ports/lockstep/portfile.cmake run as vcpkg runs it (FEATURES as given),
  # its vcpkg_* helpers replaced by stand-ins that do here what vcpkg does:
  # the same configure with the same options, the install, the move of the
  # CMake files to share/lockstep. A consumer then builds against the result.
  set(request_version ${VERSION})
  file(READ ${SOURCE_DIR}/ports/lockstep/vcpkg.json manifest)
  string(JSON VERSION GET "${manifest}" version)
  set(PORT lockstep)
  set(TARGET_TRIPLET x64-linux)
  set(CURRENT_PACKAGES_DIR ${WORK_DIR}/packages/${PORT}_${TARGET_TRIPLET})
  set(CURRENT_BUILDTREES_DIR ${WORK_DIR}/buildtrees/${PORT})
  string(REPLACE "," ";" FEATURES "core,${FEATURES}")
  function(vcpkg_cmake_configure)
    cmake_parse_arguments(PARSE_ARGV 0 arg "" "SOURCE_PATH" "OPTIONS;OPTIONS_RELEASE")
    if(NOT VCPKG_BUILD_TYPE STREQUAL "release")
      message(FATAL_ERROR "the port should build the release configuration only (header-only)")
    endif()
    step("vcpkg_cmake_configure" COMMAND ${CMAKE_COMMAND} -S ${arg_SOURCE_PATH} -B ${CURRENT_BUILDTREES_DIR}/rel
      -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_INSTALL_PREFIX=${CURRENT_PACKAGES_DIR} -DFETCHCONTENT_FULLY_DISCONNECTED=ON
      ${arg_OPTIONS} ${arg_OPTIONS_RELEASE})
  endfunction()
  function(vcpkg_cmake_install)
    step("vcpkg_cmake_install" COMMAND ${CMAKE_COMMAND} --build ${CURRENT_BUILDTREES_DIR}/rel --target install)
  endfunction()
  function(vcpkg_cmake_config_fixup)
    cmake_parse_arguments(PARSE_ARGV 0 arg "" "CONFIG_PATH;PACKAGE_NAME" "")
    if(NOT arg_PACKAGE_NAME)
      set(arg_PACKAGE_NAME ${PORT})
    endif()
    set(from ${CURRENT_PACKAGES_DIR}/${arg_CONFIG_PATH})
    set(to ${CURRENT_PACKAGES_DIR}/share/${arg_PACKAGE_NAME})
    if(NOT EXISTS ${from}/${arg_PACKAGE_NAME}Config.cmake)
      message(FATAL_ERROR "vcpkg_cmake_config_fixup: no ${arg_PACKAGE_NAME}Config.cmake in ${from}")
    endif()
    # share/cmake/lockstep becomes share/lockstep, one folder less deep:
    # vcpkg rewrites the targets' way up to the prefix to match.
    file(GLOB files ${from}/*)
    file(COPY ${files} DESTINATION ${to})
    file(REMOVE_RECURSE ${CURRENT_PACKAGES_DIR}/share/cmake)
    file(GLOB targets ${to}/*Targets.cmake)
    foreach(f IN LISTS targets)
      file(READ ${f} text)
      string(REGEX REPLACE "(get_filename_component\\(_IMPORT_PREFIX \"\\\${_IMPORT_PREFIX}\" PATH\\)\n)+"
        "get_filename_component(_IMPORT_PREFIX \"\${_IMPORT_PREFIX}\" PATH)\nget_filename_component(_IMPORT_PREFIX \"\${_IMPORT_PREFIX}\" PATH)\n"
        text "${text}")
      file(WRITE ${f} "${text}")
    endforeach()
  endfunction()
  function(vcpkg_fixup_pkgconfig)
    file(GLOB pcs ${CURRENT_PACKAGES_DIR}/share/pkgconfig/*.pc ${CURRENT_PACKAGES_DIR}/lib/pkgconfig/*.pc)
    foreach(pc IN LISTS pcs)
      file(READ ${pc} text)
      if(text MATCHES "${CURRENT_PACKAGES_DIR}")
        message(FATAL_ERROR "vcpkg_fixup_pkgconfig: ${pc} names the build's prefix:\n${text}")
      endif()
    endforeach()
  endfunction()
  function(vcpkg_install_copyright)
    cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "FILE_LIST")
    file(READ ${arg_FILE_LIST} text)
    file(WRITE ${CURRENT_PACKAGES_DIR}/share/${PORT}/copyright "${text}")
  endfunction()
  include(${SOURCE_DIR}/ports/lockstep/portfile.cmake)
  foreach(f share/lockstep/lockstepConfig.cmake share/lockstep/lockstepDependencies.cmake share/lockstep/copyright
            share/lockstep/usage lib/pkgconfig/lockstep.pc include/lockstep/lockstep.hpp)
    if(NOT EXISTS ${CURRENT_PACKAGES_DIR}/${f})
      message(FATAL_ERROR "the port installed no ${f}")
    endif()
  endforeach()
  file(GLOB_RECURSE binaries ${CURRENT_PACKAGES_DIR}/lib/*.so* ${CURRENT_PACKAGES_DIR}/lib/*.a ${CURRENT_PACKAGES_DIR}/bin/*)
  if(binaries OR EXISTS ${CURRENT_PACKAGES_DIR}/share/doc)
    message(FATAL_ERROR "a header-only port installed ${binaries} ${CURRENT_PACKAGES_DIR}/share/doc")
  endif()
  set(VERSION ${request_version})
  consumer_builds_and_runs(consumer -DCMAKE_PREFIX_PATH=${CURRENT_PACKAGES_DIR} ${hidden})
  expect_gemm("${run_output}" ${EXPECT_GEMM_PATH})  # the GEMM feature's, without LOCKSTEP_GEMM

elseif(MODE STREQUAL "versions")
  # The version is written once, in version.hpp; vcpkg.json must hold a
  # literal, and CHANGELOG.md's latest entry names it too.
  file(READ ${SOURCE_DIR}/ports/lockstep/vcpkg.json manifest)
  string(JSON port_version GET "${manifest}" version)
  file(STRINGS ${SOURCE_DIR}/CHANGELOG.md released REGEX "^## \\[[0-9]+\\.[0-9]+\\.[0-9]+\\]")
  list(GET released 0 latest)
  string(REGEX REPLACE "^## \\[([0-9.]+)\\].*" "\\1" latest "${latest}")
  foreach(what "ports/lockstep/vcpkg.json's version;${port_version}" "CHANGELOG.md's latest entry;${latest}")
    list(GET what 0 where)
    list(GET what 1 value)
    if(NOT value STREQUAL FULL_VERSION)
      message(FATAL_ERROR "${where} is ${value}, expected ${FULL_VERSION} (include/lockstep/core/version.hpp)")
    endif()
  endforeach()
  message("version.hpp, CMake, vcpkg.json and CHANGELOG.md say ${FULL_VERSION}")

elseif(MODE STREQUAL "conan")
  # conan create with the recipe's defaults (system libraries, offline, in a
  # private CONAN_HOME), then the same package's test_package again with MPI
  # (where MPIEXEC is given) and OpenBLAS. Nothing is written into the sources.
  if(NOT CONAN)
    message("conan not found: skipped (scripts/lib/ensure-packages.sh installs it into .conan/venv)")
    return()
  endif()
  set(conan ${CMAKE_COMMAND} -E env CONAN_HOME=${WORK_DIR}/home ${CONAN})
  set(scratch -c tools.cmake.cmake_layout:test_folder=${WORK_DIR}/test_package
      -c tools.cmake.cmaketoolchain:user_presets= -c tools.cmake.cmaketoolchain:generator=${GENERATOR})
  step("conan profile detect" COMMAND ${conan} profile detect)
  step("conan create (defaults: gemm=onednn, system libraries)" COMMAND ${conan} create ${SOURCE_DIR} -nr
    --build=missing ${scratch})
  if(NOT step_output MATCHES "lockstep ${VERSION}\.[0-9]+: gemm=")
    message(FATAL_ERROR "conan create ran no test_package program:\n${step_output}")
  endif()
  set(options -o "lockstep/*:gemm=openblas")
  if(MPIEXEC)
    list(APPEND options -o "lockstep/*:with_mpi=True")
  endif()
  step("conan test test_package (${options})" COMMAND ${conan} test ${SOURCE_DIR}/test_package
    lockstep/${FULL_VERSION} -nr ${options} ${scratch})
  expect_gemm("${step_output}" blas)
  if(MPIEXEC AND NOT step_output MATCHES "Component target declared 'lockstep::mpi'")
    message(FATAL_ERROR "with_mpi=True gave no lockstep::mpi:\n${step_output}")
  endif()

else()
  message(FATAL_ERROR "check.cmake: MODE is '${MODE}', expected build_tree, install_hidden, install_found, "
                      "subdirectory, fetchcontent, readme, conan, vcpkg_port or versions")
endif()

string(TIMESTAMP finish "%s")
math(EXPR seconds "${finish} - ${start}")
message("${MODE}: passed in ${seconds} s")
