"""The C library through ctypes: where it is found, the structs of mfact.h, the prototypes.

Every struct mirrors include/mfact/mfact.h field for field (tests/test_abi.py compiles the
header and compares sizes and offsets). Option and report structs start with struct_size;
the library reads only that many bytes, so this binding keeps working against a newer
library, and a field it does not declare keeps the library's default.
"""
import ctypes
import glob
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_float, c_int,
                    c_int32, c_int64, c_size_t, c_uint, c_uint64, c_void_p)

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    """Where libmfact may be: MFACT_LIBRARY, then inside the package (pip's install)."""
    env = os.environ.get("MFACT_LIBRARY")
    if env:
        yield env
    for pattern in ("lib*/libmfact.so.*", "lib*/libmfact.so", "lib*/libmfact.*.dylib"):
        for path in sorted(glob.glob(os.path.join(_HERE, pattern))):
            yield path


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError("mfact: libmfact was not found in the package "
                      f"({_HERE}) nor through MFACT_LIBRARY" +
                      ("; tried " + "; ".join(tried) if tried else ""))


lib, library_path = _load()

# ---- enums (values from mfact.h) ---------------------------------------------------------
MEMORY_HOST, MEMORY_DEVICE = 0, 1
# mf_precision, by the names mfact.sddmm takes
PRECISIONS = {"fp32": 0, "3xtf32": 1, "tf32": 2, "bf16": 3, "fp16": 4}
BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}
SPARSE_SUM_DUPLICATES, SPARSE_PATTERN, SPARSE_KEEP_LAST = 1, 2, 4


# ---- structs -----------------------------------------------------------------------------
class CtxOpts(Structure):
    _fields_ = [("struct_size", c_size_t), ("backend", c_int), ("device", c_int),
                ("device_memory_limit", c_size_t), ("cpu_threads", c_int), ("seed", c_uint64),
                ("log", c_void_p), ("log_user", c_void_p), ("log_level", c_int),
                ("device_alloc", c_void_p), ("device_free", c_void_p),
                ("allocator_user", c_void_p)]


class ReadOpts(Structure):
    _fields_ = [("struct_size", c_size_t), ("format", c_int), ("index_base", c_int),
                ("rows", c_int32), ("cols", c_int32), ("flags", c_uint),
                ("map_ids", c_int), ("row_column", c_char_p), ("col_column", c_char_p),
                ("value_column", c_char_p), ("row_field", c_int), ("col_field", c_int),
                ("value_field", c_int), ("row_ids", c_void_p), ("col_ids", c_void_p),
                ("part_index", c_int), ("part_count", c_int)]


class Progress(Structure):
    _fields_ = [("iteration", c_int), ("seconds", c_double), ("train_rmse", c_double),
                ("test_rmse", c_double)]


PROGRESS_FN = CFUNCTYPE(c_int, c_void_p, POINTER(Progress))


class Biases(Structure):
    _fields_ = [("mean", c_float), ("user", c_void_p), ("item", c_void_p)]


class Model(Structure):
    _fields_ = [("struct_size", c_size_t), ("users", c_int32), ("items", c_int32), ("k", c_int),
                ("U", c_void_p), ("ldu", c_int64), ("V", c_void_p), ("ldv", c_int64),
                ("mean", c_float), ("user_bias", c_void_p), ("item_bias", c_void_p),
                ("where", c_int), ("precision", c_int)]


class ModelSaveOpts(Structure):
    _fields_ = [("struct_size", c_size_t), ("algorithm", c_char_p), ("options", c_char_p),
                ("user_ids", c_void_p), ("item_ids", c_void_p)]


class AlsOpts(Structure):
    _fields_ = [("struct_size", c_size_t), ("rank", c_int), ("lambda_", c_float),
                ("iterations", c_int), ("init", c_int), ("test", c_void_p),
                ("progress", PROGRESS_FN), ("progress_user", c_void_p), ("biases", c_int),
                ("lambda_bias", c_float), ("bias_out", POINTER(Biases)), ("tune", c_uint),
                ("weighting", c_int), ("solver", c_int), ("cg_steps", c_int), ("tf32", c_int),
                ("rmse_precision", c_int), ("layout", c_int)]


class AlsReport(Structure):
    _fields_ = [("struct_size", c_size_t), ("iterations", c_int), ("seconds", c_double),
                ("iteration_seconds", c_double), ("gram_seconds", c_double),
                ("solve_seconds", c_double), ("train_rmse", c_double), ("test_rmse", c_double),
                ("peak_device_bytes", c_size_t), ("lambda_", c_float), ("rank", c_int),
                ("validation_rmse", c_double), ("solver", c_int),
                ("group_wait_seconds", c_double), ("group_exchange_seconds", c_double),
                ("layout", c_int)]


class SgdOpts(Structure):
    _fields_ = [("struct_size", c_size_t), ("rank", c_int), ("learning_rate", c_float),
                ("schedule", c_int), ("decay", c_float), ("lambda_u", c_float),
                ("lambda_v", c_float), ("epochs", c_int), ("storage", c_int), ("init", c_int),
                ("workers", c_int), ("test", c_void_p), ("progress", PROGRESS_FN),
                ("progress_user", c_void_p), ("order", c_int), ("biases", c_int),
                ("lambda_bias", c_float), ("bias_out", POINTER(Biases)), ("tune", c_uint)]


class SgdReport(Structure):
    _fields_ = [("struct_size", c_size_t), ("epochs", c_int), ("workers", c_int),
                ("seconds", c_double), ("epoch_seconds", c_double),
                ("updates_per_second", c_double), ("train_rmse", c_double),
                ("test_rmse", c_double), ("peak_device_bytes", c_size_t), ("lambda_", c_float),
                ("rank", c_int), ("validation_rmse", c_double)]


class BmfProgress(Structure):
    _fields_ = [("sweep", c_int), ("seconds", c_double), ("error", c_int64),
                ("relative_error", c_double), ("precision", c_double), ("recall", c_double),
                ("f1", c_double), ("weight", c_double), ("start_done", c_double)]


BMF_PROGRESS_FN = CFUNCTYPE(c_int, c_void_p, POINTER(BmfProgress))


class BmfOpts(Structure):
    _fields_ = [("struct_size", c_size_t), ("rank", c_int), ("instances", c_int),
                ("max_sweeps", c_int), ("patience", c_int), ("target_error", c_double),
                ("time_limit", c_double), ("weight", c_float), ("weight_decay", c_float),
                ("weight_floor", c_float), ("init", c_int), ("progress", BMF_PROGRESS_FN),
                ("progress_user", c_void_p), ("flip", c_int), ("flip_probability", c_float),
                ("temperature", c_float), ("temperature_decay", c_float)]


class BmfReport(Structure):
    _fields_ = [("struct_size", c_size_t), ("tp", c_int64), ("fp", c_int64), ("fn", c_int64),
                ("error", c_int64), ("relative_error", c_double), ("precision", c_double),
                ("recall", c_double), ("f1", c_double), ("sweeps", c_int),
                ("best_instance", c_int), ("seconds", c_double),
                ("peak_device_bytes", c_size_t)]


class AsdOpts(Structure):
    _fields_ = [("struct_size", c_size_t), ("rank", c_int), ("variant", c_int),
                ("tolerance", c_double), ("stagnation_window", c_int),
                ("stagnation_rate", c_double), ("max_iterations", c_int),
                ("time_limit", c_double), ("init", c_int), ("test", c_void_p),
                ("progress", PROGRESS_FN), ("progress_user", c_void_p),
                ("rank_continuation", c_int), ("precision", c_int)]


class AsdReport(Structure):
    _fields_ = [("struct_size", c_size_t), ("iterations", c_int), ("stopped", c_int),
                ("relative_residual", c_double), ("test_rmse", c_double),
                ("singular_steps", c_int), ("seconds", c_double),
                ("peak_device_bytes", c_size_t), ("reduced_iterations", c_int)]


class IalsOpts(Structure):
    _fields_ = [("struct_size", c_size_t), ("rank", c_int), ("lambda_", c_float),
                ("alpha", c_float), ("confidence", c_int), ("epsilon", c_float),
                ("iterations", c_int), ("init", c_int), ("solver", c_int), ("cg_steps", c_int),
                ("progress", PROGRESS_FN), ("progress_user", c_void_p), ("fp16", c_int)]


class IalsReport(Structure):
    _fields_ = [("struct_size", c_size_t), ("iterations", c_int), ("seconds", c_double),
                ("iteration_seconds", c_double), ("loss", c_double), ("solver", c_int),
                ("peak_device_bytes", c_size_t)]


class Ranking(Structure):
    _fields_ = [("struct_size", c_size_t), ("precision", c_double), ("map", c_double),
                ("ndcg", c_double), ("auc", c_double), ("users", c_int64)]


# ---- prototypes --------------------------------------------------------------------------
# Every bound function by its C name (tests/test_abi.py checks each against mfact.h).
PROTOTYPES = {}


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    PROTOTYPES[name] = f
    return f


def _proto_experimental(name, restype, *argtypes):
    """A function of the header's EXPERIMENTAL section, or one newer than some libraries
    of this major version (the saved models'), or None when the loaded library lacks it (a
    library from before it: the package still loads, and the Python call that needs it
    says so)."""
    return _proto(name, restype, *argtypes) if hasattr(lib, name) else None


def _init_sized(name, struct):
    """The struct's initializer through `name`_sized with ctypes.sizeof(struct): the library
    writes no byte past this binding's struct, whichever version it is."""
    f = _proto(name + "_sized", None, POINTER(struct), c_size_t)
    size = ctypes.sizeof(struct)
    return lambda p: f(p, size)


P = c_void_p
mf_version_string = _proto("mf_version_string", c_char_p)
mf_build_info = _proto("mf_build_info", c_char_p)
mf_status_string = _proto("mf_status_string", c_char_p, c_int)
mf_ctx_opts_init = _init_sized("mf_ctx_opts_init", CtxOpts)
mf_ctx_create = _proto("mf_ctx_create", c_int, POINTER(P), POINTER(CtxOpts))
mf_ctx_destroy = _proto("mf_ctx_destroy", None, P)
mf_ctx_last_error = _proto("mf_ctx_last_error", c_char_p, P)
mf_ctx_backend = _proto("mf_ctx_backend", c_int, P)
mf_ctx_stream = _proto("mf_ctx_stream", P, P)
mf_sparse_from_coo = _proto("mf_sparse_from_coo", c_int, P, POINTER(P), c_int32, c_int32,
                            c_int64, P, P, P, c_int, c_uint)
mf_sparse_from_csr = _proto("mf_sparse_from_csr", c_int, P, POINTER(P), c_int32, c_int32,
                            c_int64, P, P, P, c_int, c_uint)
mf_sparse_destroy = _proto("mf_sparse_destroy", None, P)
mf_sparse_shape = _proto("mf_sparse_shape", c_int, P, POINTER(c_int32), POINTER(c_int32),
                         POINTER(c_int64))
mf_sparse_has_values = _proto("mf_sparse_has_values", c_int, P)
mf_sparse_get_csr = _proto("mf_sparse_get_csr", c_int, P, P, P, P, c_int)
mf_read_opts_init = _init_sized("mf_read_opts_init", ReadOpts)
mf_sparse_read = _proto("mf_sparse_read", c_int, P, POINTER(P), c_char_p, POINTER(ReadOpts))
mf_sddmm = _proto("mf_sddmm", c_int, P, P, c_int, P, c_int64, P, c_int64, c_float, c_float, P,
                  c_int, c_uint)
mf_sddmm_ex = _proto("mf_sddmm_ex", c_int, P, P, c_int, P, c_int64, P, c_int64, c_float, c_float,
                     P, c_int, c_uint, c_int)
mf_spmm = _proto("mf_spmm", c_int, P, c_int, P, c_int64, c_float, P, c_int64, c_float, P,
                 c_int64, c_int)
mf_model_init = _init_sized("mf_model_init", Model)
mf_predict_pairs = _proto("mf_predict_pairs", c_int, P, POINTER(Model), c_int64, P, P, P)
mf_model_rmse = _proto("mf_model_rmse", c_int, P, POINTER(Model), P, POINTER(c_double))
# Saved models (mf_model_save, mf_model_load): optional, so that the package still loads a
# library of this major version from before them (save and load then say so).
mf_model_save_opts_init = _init_sized("mf_model_save_opts_init", ModelSaveOpts) \
    if hasattr(lib, "mf_model_save_opts_init_sized") else None
mf_model_save = _proto_experimental("mf_model_save", c_int, P, POINTER(Model),
                                    POINTER(ModelSaveOpts), c_char_p)
mf_model_load = _proto_experimental("mf_model_load", c_int, P, c_char_p, POINTER(P))
mf_saved_model_view = _proto_experimental("mf_saved_model_view", c_int, P, POINTER(Model))
mf_saved_model_algorithm = _proto_experimental("mf_saved_model_algorithm", c_char_p, P)
mf_saved_model_options = _proto_experimental("mf_saved_model_options", c_char_p, P)
mf_saved_model_library_version = _proto_experimental("mf_saved_model_library_version",
                                                     c_char_p, P)
mf_saved_model_destroy = _proto_experimental("mf_saved_model_destroy", None, P)
# Ids as users have them (mfact.read(..., user_col=...), the models' ids): optional too.
mf_sparse_row_ids = _proto_experimental("mf_sparse_row_ids", P, P)
mf_sparse_set_part = _proto_experimental("mf_sparse_set_part", c_int, P, c_int)
mf_sparse_is_part = _proto_experimental("mf_sparse_is_part", c_int, P)
mf_sparse_col_ids = _proto_experimental("mf_sparse_col_ids", P, P)
mf_saved_model_user_ids = _proto_experimental("mf_saved_model_user_ids", P, P)
mf_saved_model_item_ids = _proto_experimental("mf_saved_model_item_ids", P, P)
mf_id_map_create = _proto_experimental("mf_id_map_create", c_int, P, POINTER(P), c_int32, P)
mf_id_map_destroy = _proto_experimental("mf_id_map_destroy", None, P)
mf_id_map_count = _proto_experimental("mf_id_map_count", c_int32, P)
mf_id_map_id = _proto_experimental("mf_id_map_id", c_char_p, P, c_int32)
mf_id_map_index = _proto_experimental("mf_id_map_index", c_int32, P, c_char_p)
mf_als_opts_init = _init_sized("mf_als_opts_init", AlsOpts)
mf_als_run = _proto("mf_als_run", c_int, P, P, POINTER(AlsOpts), P, P, c_int,
                    POINTER(AlsReport))
mf_sgd_opts_init = _init_sized("mf_sgd_opts_init", SgdOpts)
mf_sgd_hogwild_run = _proto("mf_sgd_hogwild_run", c_int, P, P, POINTER(SgdOpts), P, P, c_int,
                            POINTER(SgdReport))
mf_bmf_opts_init = _init_sized("mf_bmf_opts_init", BmfOpts)
mf_bmf_run = _proto("mf_bmf_run", c_int, P, P, POINTER(BmfOpts), P, P, c_int,
                    POINTER(BmfReport))
mf_asd_opts_init = _init_sized("mf_asd_opts_init", AsdOpts)
mf_asd_run = _proto("mf_asd_run", c_int, P, P, POINTER(AsdOpts), P, P, c_int,
                    POINTER(AsdReport))
mf_ials_opts_init = _init_sized("mf_ials_opts_init", IalsOpts)
mf_ials_run = _proto("mf_ials_run", c_int, P, P, POINTER(IalsOpts), P, P, c_int,
                     POINTER(IalsReport))
mf_ials_fold_in = _proto("mf_ials_fold_in", c_int, P, P, POINTER(IalsOpts), P, P, c_int)
mf_recommend = _proto("mf_recommend", c_int, P, POINTER(Model), c_int64, P, P, c_int, P, P)
mf_similar_items = _proto("mf_similar_items", c_int, P, POINTER(Model), c_int64, P, c_int, P,
                          P)
mf_ranking_evaluate = _proto("mf_ranking_evaluate", c_int, P, POINTER(Model), P, P, c_int,
                             POINTER(Ranking))

# EXPERIMENTAL: groups of processes (the header's "Groups of contexts" and "One process per
# GPU"; mfact.Context.join).
NCCL_ID_BYTES = 128  # MF_NCCL_ID_BYTES
mf_ctx_rank = _proto_experimental("mf_ctx_rank", c_int, P, POINTER(c_int), POINTER(c_int))
mf_ctx_set_mpi_comm = _proto_experimental("mf_ctx_set_mpi_comm", c_int, P, P)
mf_nccl_make_id = _proto_experimental("mf_nccl_make_id", c_int, P, P, c_size_t)
mf_ctx_join_nccl_id = _proto_experimental("mf_ctx_join_nccl_id", c_int, P, P, c_size_t, c_int,
                                          c_int)
mf_launch_detect = _proto_experimental("mf_launch_detect", c_int, POINTER(c_int),
                                       POINTER(c_int), POINTER(c_int))
mf_ctx_join_launched = _proto_experimental("mf_ctx_join_launched", c_int, P, c_char_p,
                                           c_double)


class GroupStats(Structure):
    _fields_ = [("struct_size", c_size_t), ("wait_seconds", c_double),
                ("exchange_seconds", c_double), ("exchange_bytes", c_int64), ("calls", c_int64)]


mf_ctx_group_stats = _proto_experimental("mf_ctx_group_stats", c_int, P, POINTER(GroupStats))
