"""The package's build backend: scikit-build-core's, after one check.

The package is built from the repository that holds this folder: CMake
compiles the library and the CLI from the sources beside `python/`
(pyproject.toml's cmake.source-dir ".."). A copy of `python/` alone, or an
sdist of it, has none: every hook says so before anything is compiled,
instead of CMake failing on a missing or unrelated parent directory.
"""
import os

from scikit_build_core import build as _backend

_PYTHON = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_REPO = os.path.dirname(_PYTHON)
_NEEDED = ("CMakeLists.txt", os.path.join("include", "tensorscope.h"), "src")


def _check():
    missing = [p for p in _NEEDED if not os.path.exists(os.path.join(_REPO, p))]
    if missing:
        raise RuntimeError(
            f"tensorscope-ml is built from the tensorscope repository that holds its python/ folder, "
            f"and {_PYTHON} is not inside one ({', '.join(os.path.join(_REPO, p) for p in missing)} "
            f"missing). Install it from a clone of the repository: `pip install ./python` at its top; "
            f"or, to use a library built elsewhere, put python/ on PYTHONPATH and set "
            f"TENSORSCOPE_LIBRARY to that libtensorscope.so")


def _checked(hook):
    def run(*args, **kwargs):
        _check()
        return hook(*args, **kwargs)
    run.__name__ = hook.__name__
    run.__doc__ = hook.__doc__
    return run


for _name in ("build_wheel", "build_sdist", "build_editable", "get_requires_for_build_wheel",
              "get_requires_for_build_sdist", "get_requires_for_build_editable",
              "prepare_metadata_for_build_wheel", "prepare_metadata_for_build_editable"):
    if hasattr(_backend, _name):
        globals()[_name] = _checked(getattr(_backend, _name))
