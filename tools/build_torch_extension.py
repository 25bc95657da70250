"""Compiles the PyTorch backend (src/torch/*.cc) against the torch of the Python that
runs this script, linking the project's libraries from a kit (tools/torch-kit.sh pack): for a
machine whose torch is not Debian's (torch 2.x with CUDA) and that lacks the Debian packages the
CMake build needs. Writes OUT/atp_torch: __init__.py, the extension _C, and the kit's atp beside it
(what ATP_LOCAL=1 starts).

Usage: python3 tools/build_torch_extension.py KIT OUT
"""
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import torch
from torch.utils import cpp_extension


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kit, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    root = Path(__file__).resolve().parents[1]
    package = out / "atp_torch"
    package.mkdir(parents=True, exist_ok=True)
    lib = kit / "lib"
    extension = package / ("_C" + sysconfig.get_config_var("EXT_SUFFIX"))
    command = ["c++", "-shared", "-fPIC", "-O2", "-std=c++20", "-fvisibility=hidden",
               f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
               f"-I{root / 'include'}", f"-isystem{kit / 'include'}",  # the kit's Eigen
               f"-isystem{sysconfig.get_paths()['include']}"]
    command += [f"-isystem{p}" for p in cpp_extension.include_paths()]
    # pybind11 shares types (torch's Store, Backend, Work) between modules whose ABI tags match:
    # torch's own, as torch.utils.cpp_extension passes them.
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        value = getattr(torch._C, f"_PYBIND11_{name}", None)
        if value is not None:
            command.append(f'-DPYBIND11_{name}="{value}"')
    # One translation unit of every src/torch/*.cc, as CMake's unity build compiles them: each
    # includes torch's headers, which take most of the time of compiling one.
    unity = out / "atp_torch_unity.cc"
    unity.write_text("".join(f'#include "{p}"\n' for p in sorted((root / "src" / "torch").glob("*.cc"))))
    command += [str(unity), "-o", str(extension)]
    command += ["-Wl,--start-group", *sorted(str(p) for p in lib.glob("libatp_*.a")), "-Wl,--end-group"]
    # The C++ runtime before torch's libraries: pip's libtorch.so exports copies of some of it
    # (std::filesystem::remove_all among them, from its toolchain's static part of libstdc++),
    # and the first library in this list that defines a symbol is the one the extension calls.
    # torch 2.11's copy of remove_all jumped to address 0.
    command += ["-Wl,--no-as-needed", "-lstdc++"]
    # The shared libraries of the kit: those the static ones need stay (--as-needed drops the rest).
    command += [f"-L{lib}", "-Wl,--as-needed", *sorted(f"-l:{p.name}" for p in lib.glob("*.so*")),
                f"-Wl,-rpath,{lib}"]
    for p in cpp_extension.library_paths():
        command += [f"-L{p}", f"-Wl,-rpath,{p}"]
    command += ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)
    shutil.copy(kit / "__init__.py", package / "__init__.py")
    shutil.copy(kit / "bin" / "atp", package / "atp")
    print(f"built {extension}")


if __name__ == "__main__":
    main()
