"""Where the package keeps the C/C++ library, for extensions built against it."""

import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_include():
    """The directory holding ``convjit/convjit.h`` and ``convjit/convjit.hpp``."""
    return os.path.join(_HERE, "include")


def get_library_dir():
    """The directory holding ``libconvjit.so`` (link with ``-L<dir> -lconvjit``)."""
    return os.path.join(_HERE, "lib")


def get_cmake_dir():
    """The CMake package directory: ``find_package(convjit)`` with ``convjit_DIR`` set to it."""
    return os.path.join(_HERE, "lib", "cmake", "convjit")
