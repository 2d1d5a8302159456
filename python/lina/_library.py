"""Loads lina's PyTorch extension (_C.so: the torch.ops.lina operators)."""
import os
from pathlib import Path

import torch


def _find():
    """The extension installed beside this file, else $LINA_TORCH_LIB (a build tree's bindings/torch/_C.so)."""
    here = Path(__file__).resolve().parent / "_C.so"
    if here.is_file():
        return here
    env = os.environ.get("LINA_TORCH_LIB")
    if env:
        if not Path(env).is_file():
            raise ImportError(f"lina: LINA_TORCH_LIB={env!r} is not a file; expected the path of lina's _C.so")
        return Path(env)
    raise ImportError("lina: the extension _C.so is not installed beside lina/__init__.py; install lina with "
                      "`pip install --no-build-isolation .` or point LINA_TORCH_LIB at a build's bindings/torch/_C.so")


def _minor(version):
    return tuple(version.split("+")[0].split(".")[:2])


def _load(path):
    """Loads the extension; a library that does not load, or was built against another torch, is an ImportError
    that names the file and both versions (C++ extensions are tied to one torch release)."""
    try:
        torch.ops.load_library(str(path))
    except (OSError, RuntimeError) as e:
        raise ImportError(f"lina: {path} could not be loaded into torch {torch.__version__} ({e}); rebuild lina "
                          "against this torch (`pip install --no-build-isolation .`)") from e
    built = torch.ops.lina.torch_version()
    if _minor(built) != _minor(torch.__version__):
        raise ImportError(f"lina: {path} was built against torch {built}, this process runs torch "
                          f"{torch.__version__}; rebuild lina against this torch")


_PATH = _find()
_load(_PATH)


def library_path():
    """The path of the loaded extension."""
    return str(_PATH)


def version():
    return torch.ops.lina.version()
