"""`pip install .` and `pip wheel .`: the PyTorch backend atp_torch, built by CMake against the torch
of the Python that runs pip (its C++ extension, and the `atp` binary it starts a local switch and
PS from, which the package carries).

Debian has no PyPI, so pip cannot fetch a build environment: use the system's setuptools and wheel,

    /usr/bin/python3 -m pip install --no-build-isolation .

ATP_BUILD_DIR names a CMake build folder to build in (and reuse); by default build-pip/ here.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# The version is written once, in CMakeLists.txt's project().
VERSION = re.search(r"project\(atp VERSION (\S+)", (ROOT / "CMakeLists.txt").read_text()).group(1)


class CMakeBuild(build_ext):
    """Builds the package with CMake and copies it, as CMake laid it out, where setuptools packs it."""

    def build_extension(self, ext):
        build = Path(os.environ.get("ATP_BUILD_DIR") or ROOT / "build-pip" / "cmake")
        if not (build / "CMakeCache.txt").exists():
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                            f"-DPython_EXECUTABLE={sys.executable}", "-DATP_BUILD_TESTS=OFF",
                            "-DATP_BUILD_BENCHMARKS=OFF"], check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "atp_torch_ext", "atp"], check=True)
        built = build / "python" / "atp_torch"
        target = Path(self.build_lib) / "atp_torch"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(built, target, ignore=shutil.ignore_patterns("__pycache__"))


setup(
    name="atp_torch",
    version=VERSION,
    description="ATP's torch.distributed backend: in-network gradient aggregation without special hardware",
    python_requires=">=3.9",
    ext_modules=[Extension("atp_torch._C", sources=[])],  # built by CMake (CMakeBuild)
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": str(ROOT / "build-pip" / "setuptools")}},
    zip_safe=False,
)
