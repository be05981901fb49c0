"""mfact: matrix factorization on NVIDIA GPUs and CPUs (the Python binding of libmfact).

    import mfact, scipy.sparse
    R = mfact.read("u.data")                      # scipy.sparse.csr_matrix
    model = mfact.ALS(rank=32).fit(R)
    model.predict([0, 1], [10, 20])
    ials = mfact.ImplicitALS(rank=64).fit(plays)  # implicit feedback
    ids, scores = ials.recommend([0, 1], N=10)
    ctx = mfact.Context(process_group="torch")    # one fit across processes (Context.join)
    model.save("model.mfm"); mfact.load("model.mfm")  # model files (the tool's too)

See docs/python.md in the repository.
"""
from . import _lib
from ._arrays import Matrix
from ._context import Context, Launch, default_context, launch_info
from ._errors import (Cancelled, CudaError, Error, FileError, InternalError, InvalidArgument,
                      InvalidData, NoDevice, NumericError, OutOfMemory, Unsupported)
from ._progress import set_interrupt_checks
from .models import ALS, BMF, SGD, ImplicitALS, complete, load, ranking_metrics
from .ops import read, sddmm, spmm

__version__ = _lib.mf_version_string().decode()
library_path = _lib.library_path


def build_info():
    """How the loaded libmfact was built (backends, CUDA architectures, compiler)."""
    return _lib.mf_build_info().decode()


__all__ = ["ALS", "BMF", "SGD", "ImplicitALS", "complete", "ranking_metrics", "load",
           "set_interrupt_checks", "Context",
           "Matrix", "read", "sddmm", "spmm", "default_context", "launch_info", "Launch",
           "build_info", "Error",
           "InvalidArgument", "InvalidData", "OutOfMemory", "NoDevice", "Unsupported",
           "CudaError", "FileError", "Cancelled", "NumericError", "InternalError"]
