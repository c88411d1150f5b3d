# Conan 2 recipe for lockstep, a header-only library. Its package_info maps to
# the targets of lockstep's own CMake package: lockstep::lockstep (headers,
# C++17, threads, zlib, the host GEMM's library), lockstep::mpi and
# lockstep::cuda. By default the libraries come from the system, as a recipe
# for a private remote would take them (it then works offline);
# -o "lockstep/*:system_deps=False" takes zlib, oneDNN, OpenBLAS and Open MPI
# from ConanCenter instead (README, "Using it"). CUDA and NCCL always come from
# the system: ConanCenter has neither.
import os
import re

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.build import check_min_cppstd
from conan.tools.files import copy, load
from conan.tools.gnu import PkgConfig
from conan.tools.layout import basic_layout

required_conan_version = ">=2.0"


class LockstepConan(ConanFile):
    name = "lockstep"
    description = "Synchronous data-parallel training, composed at compile time (header-only C++17)"
    license = "Apache-2.0"
    topics = ("deep-learning", "data-parallel", "training", "header-only", "mpi", "cuda")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    options = {
        "with_mpi": [True, False],
        "with_cuda": [True, False],
        "with_zlib": [True, False],
        "gemm": ["onednn", "openblas", "builtin"],
        "system_deps": [True, False],
    }
    default_options = {
        "with_mpi": False,
        "with_cuda": False,
        "with_zlib": True,
        "gemm": "onednn",
        "system_deps": True,
    }
    exports_sources = "include/*", "LICENSE"
    no_copy_source = True

    def set_version(self):
        # The version is written once, in version.hpp.
        text = load(self, os.path.join(self.recipe_folder, "include", "lockstep", "core", "version.hpp"))
        parts = [re.search(rf"#define LOCKSTEP_VERSION_{p} +(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
        if not all(parts):
            raise ConanInvalidConfiguration("include/lockstep/core/version.hpp: LOCKSTEP_VERSION_MAJOR/MINOR/PATCH "
                                            "not found")
        self.version = ".".join(m.group(1) for m in parts)

    def layout(self):
        basic_layout(self, src_folder=".")

    def requirements(self):
        if self.options.system_deps:
            return
        if self.options.with_zlib:
            self.requires("zlib/[>=1.2.11 <2]")
        if self.options.gemm == "onednn":
            self.requires("onednn/[>=2.6 <4]")
        elif self.options.gemm == "openblas":
            self.requires("openblas/[>=0.3.20 <1]")
        if self.options.with_mpi:
            self.requires("openmpi/[>=4.1 <6]")

    def package_id(self):
        # The same headers whatever the options: these change package_info only.
        self.info.clear()

    def validate(self):
        if self.settings.get_safe("compiler.cppstd"):
            check_min_cppstd(self, 17)

    def package(self):
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        copy(self, "*", os.path.join(self.source_folder, "include"), os.path.join(self.package_folder, "include"))

    def package_info(self):
        # No global target that links every component: lockstep::all stands for it.
        self.cpp_info.set_property("cmake_file_name", "lockstep")
        self.cpp_info.set_property("cmake_target_name", "lockstep::all")
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []

        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "lockstep::lockstep")
        core.set_property("pkg_config_name", "lockstep")
        core.bindirs = []
        core.libdirs = []
        if self.settings.os in ("Linux", "FreeBSD"):
            core.system_libs.append("pthread")
            core.cxxflags.append("-pthread")
        if str(self.settings.compiler) in ("gcc", "clang", "apple-clang"):
            core.cxxflags.append("-fno-math-errno")  # as LOCKSTEP_NO_MATH_ERRNO: vectorised sqrt and exp
        self._depend(core, self.options.with_zlib, "LOCKSTEP_HAVE_ZLIB", "z", "zlib::zlib")
        self._depend(core, self.options.gemm == "onednn", "LOCKSTEP_HAVE_ONEDNN", "dnnl", "onednn::onednn")
        self._depend(core, self.options.gemm == "openblas", "LOCKSTEP_HAVE_BLAS", "openblas", "openblas::openblas")

        if self.options.with_mpi:
            mpi = self.cpp_info.components["mpi"]
            mpi.set_property("cmake_target_name", "lockstep::mpi")
            mpi.set_property("pkg_config_name", "lockstep-mpi")
            mpi.requires = ["core"]
            mpi.defines = ["LOCKSTEP_HAVE_MPI=1"]
            if self.options.system_deps:
                # The system's MPI as its pkg-config file describes it (Open MPI and MPICH ship one).
                PkgConfig(self, self.conf.get("user.lockstep:mpi_pkg_config", default="mpi-cxx")).fill_cpp_info(
                    mpi, is_system=True)
            else:
                mpi.requires.append("openmpi::openmpi")

        if self.options.with_cuda:
            # CUDA and NCCL from the system: user.lockstep:cuda_root / nccl_root, else
            # $CUDA_PATH / $NCCL_ROOT, else NCCL beside the toolkit in /usr/local/cuda.
            cuda_root = self.conf.get("user.lockstep:cuda_root", default=os.environ.get("CUDA_PATH", "/usr/local/cuda"))
            nccl_root = self.conf.get("user.lockstep:nccl_root", default=os.environ.get("NCCL_ROOT", cuda_root))
            cuda = self.cpp_info.components["cuda"]
            cuda.set_property("cmake_target_name", "lockstep::cuda")
            cuda.set_property("pkg_config_name", "lockstep-cuda")
            cuda.requires = ["core"]
            cuda.defines = ["LOCKSTEP_HAVE_CUDA=1"]
            cuda.bindirs = []
            cuda.includedirs = sorted({os.path.join(cuda_root, "include"), os.path.join(nccl_root, "include")})
            cuda.libdirs = sorted({os.path.join(cuda_root, d) for d in ("lib64", "lib")} |
                                  {os.path.join(nccl_root, d) for d in ("lib64", "lib")})
            cuda.system_libs = ["cudart", "cublas", "cublasLt", "nccl"]

    def _depend(self, component, wanted, macro, system_lib, conan_component):
        # A library lockstep::lockstep uses: the macro that turns its code on, and the
        # library from the system (linked by name) or from its Conan package.
        if macro == "LOCKSTEP_HAVE_ZLIB":
            component.defines.append(f"LOCKSTEP_HAVE_ZLIB={1 if wanted else 0}")
        elif wanted:
            component.defines.append(f"{macro}=1")
        if not wanted:
            return
        if self.options.system_deps:
            component.system_libs.append(system_lib)
        else:
            component.requires.append(conan_component)
