"""Models in the style of implicit and scikit-learn: ALS, SGD (explicit ratings),
ImplicitALS (implicit feedback) and BMF.

Hyperparameters carry the C library's names and defaults (`lambda` is `lambda_`, a Python
keyword otherwise); a parameter left at None takes the library's default, read from its
mf_*_opts_init, so the two never drift apart. After `fit`, the fitted parts are attributes
(`user_factors`, `item_factors`, `user_biases`, `item_biases`, `mean`) and the run's report
is `report` (a dict of mf_*_report's fields). Every factor model recommends through the
library (mf_recommend, mf_similar_items), and `ranking_metrics` scores it on held-out
interactions (mf_ranking_evaluate)."""
import copy
import ctypes
import inspect

import numpy as np

from . import _ids, _lib, _progress
from ._arrays import _checked_index, _device_index, as_c, as_matrix, on_device, on_device_any, ptr
from ._context import default_context, resolve
from ._errors import Cancelled, InvalidData, check
from ._ints import IdError, to_c
from ._text import c_path, c_text

_ALS_INIT = {"mean": 0, "uniform": 2}
_WEIGHTING = {"count": 0, "none": 1}
_SOLVER = {"auto": 0, "exact": 1, "cg": 2}
_SOLVER_NAMES = {v: k for k, v in _SOLVER.items()}
_LAYOUT = {"auto": 0, "replicated": 1, "sharded": 2}
_LAYOUT_NAMES = {v: k for k, v in _LAYOUT.items()}
_TUNE = {None: 0, False: 0, "lambda": 1, "rank": 3, True: 1}
_SGD_STORAGE = {"fp32": 0, "fp16": 1}
_SGD_SCHEDULE = {"inverse-time": 0, "constant": 1}
_BMF_INIT = {"sample": 0, "random": 1, "asso": 3, "auto": 4}
_IALS_CONFIDENCE = {"linear": 0, "log": 1}


def _choice(table, value, name):
    try:
        return table[value]
    except (KeyError, TypeError):
        names = ", ".join(repr(k) for k in table if isinstance(k, str))
        raise ValueError(f"mfact: {name} must be one of {names}, not {value!r}") from None


def _bar(ctx, show_progress):
    """Whether to draw the progress bar: on rank 0 alone in a group of processes (every
    rank runs the same iterations; a callback still runs on every rank)."""
    return bool(show_progress) and ctx.rank == 0


def _set_ints(o, owner, names, prefix=None):
    """The integer options among `names` that are set on `owner` (None: the library's
    default), checked against their C fields' range and stored in the struct `o`."""
    prefix = prefix or type(owner).__name__
    for name in names:
        value = getattr(owner, name)
        if value is not None:
            setattr(o, name, to_c(value, f"mfact.{prefix}: {name}"))


def _report(rep, skip=("struct_size",)):
    out = {}
    for name, _ in rep._fields_:
        if name in skip:
            continue
        out[name.rstrip("_")] = getattr(rep, name)
    return out


def _precision(value, fn):
    """An mf_precision by its name (the names mfact.sddmm takes)."""
    if value not in _lib.PRECISIONS:
        raise ValueError(f"mfact.{fn}: precision {value!r} is not one of "
                         f"{', '.join(_lib.PRECISIONS)}")
    return _lib.PRECISIONS[value]


def _make_model(U, V, mean, bu, bi, where):
    """An mf_model over arrays already in the C types (float32, C-contiguous), kept alive
    with it (`_keep`: U, V and the biases, None where absent)."""
    m = _lib.Model()
    _lib.mf_model_init(ctypes.byref(m))
    m.users, m.items, m.k = U.shape[0], V.shape[0], U.shape[1]
    m.U, m.ldu, m.V, m.ldv = ptr(U), U.shape[1], ptr(V), V.shape[1]
    m.mean = mean
    m.user_bias, m.item_bias = ptr(bu), ptr(bi)
    m.where = where
    m._keep = (U, V, bu, bi)
    return m


def _factor_arrays(fw, arrays):
    """The public factor and bias attributes as the C types, converted where they are not
    (None stays None): NumPy on the host, the fit's device library on the device."""
    conv = (lambda a, n: as_c(a, np.float32, n)) if fw is None else \
        (lambda a, n: on_device(a, fw, np.float32, n))
    return [None if a is None else conv(a, n) for a, n in arrays]


# The largest rank any algorithm takes (BMF's): outputs are sized by the rank only within
# it. Outside it every algorithm refuses the rank, naming it, before touching an output, so
# ALS(rank=2**31 - 1) is the library's InvalidArgument, not a 240 GiB allocation.
_RANK_MOST = 1024


def _out_rank(rank):
    return rank if 1 <= rank <= _RANK_MOST else 1


class _Estimator:
    """What every model shares: scikit-learn's get_params / set_params (the constructor's
    parameters, so that sklearn.base.clone and searches work), pickling and deepcopy (the
    parameters and the fitted arrays; the context, which holds the library's handle and
    its lock, stays behind: an unpickled model uses the default context)."""

    # Attributes that are not state to pickle: the context, and what is rebuilt from it.
    _UNPICKLED = ("ctx", "_fw", "_train")

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind == p.POSITIONAL_OR_KEYWORD]

    def get_params(self, deep=True):
        """The constructor's parameters as a dict (scikit-learn's convention; `deep` has
        nothing to descend into: no parameter is an estimator)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set constructor parameters by name (scikit-learn's convention) and return self.
        An unknown name is a ValueError naming the valid ones; a fitted model keeps its
        factors until the next fit."""
        valid = self._param_names()
        for name in params:
            if name not in valid:
                raise ValueError(f"mfact.{type(self).__name__}.set_params: invalid parameter "
                                 f"{name!r}; valid parameters are {', '.join(valid)}")
        for name, value in params.items():
            if name == "ctx":
                value = resolve(value)
            elif name == "fp16":
                value = bool(value)
            setattr(self, name, value)
        return self

    def __repr__(self):
        given = {k: v for k, v in self.get_params().items()
                 if k != "ctx" and v is not None and v is not False}
        return f"mfact.{type(self).__name__}(" + \
            ", ".join(f"{k}={v!r}" for k, v in given.items()) + ")"

    def __getstate__(self):
        state = {k: v for k, v in self.__dict__.items() if k not in self._UNPICKLED}
        fw = self.__dict__.get("_fw")
        state["_device"] = fw is not None  # device factors: rebuilt on the same library
        train = self.__dict__.get("_train")
        state["_train_csr"] = train.to_scipy() if train is not None else None
        return state

    def __setstate__(self, state):
        state = dict(state)
        on_device = state.pop("_device", False)
        train = state.pop("_train_csr", None)
        self.__dict__.update(state)
        self.ctx = default_context()
        if "user_factors" in state or on_device:
            from ._device import Framework
            self._fw = Framework(self.user_factors) if on_device else None
        if train is not None:
            self._train = as_matrix(train, self.ctx)

    def __deepcopy__(self, memo):
        """A copy on the same context (pickling's state, without the round trip through
        the default context)."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            shared = k in self._UNPICKLED or k == "callback"
            new.__dict__[k] = v if shared else copy.deepcopy(v, memo)
        return new


class _Recommender(_Estimator):
    """Top-N lists of a fitted factor model through the library, with implicit's method
    names and conventions: `recommend` (mf_recommend) and `similar_items`
    (mf_similar_items). Ids and results live where the model's factors do: NumPy arrays on
    the host, arrays of the fit's device library after a fit on device data."""

    _fw = None  # the device arrays' library, None on the host
    _train = None  # the interactions kept from fit (mfact.Matrix), or None
    _ALGORITHM = None  # the name a model file gives the algorithm ("als", "sgd", "ials")
    _UNSEEN_USERS = False  # whether recommend scores ids past the model's users (biases)
    saved = None  # after mfact.load: what the file said besides the model
    # The users' and items' ids (by index) of the matrix the model was fitted on, when it
    # was read with ids (mfact.read(..., user_col=...)), or of the model file; else None.
    user_ids = item_ids = None

    def _keep_ids(self, data):
        """The fitted matrix's ids (None where it has none)."""
        self.user_ids = getattr(data, "user_ids", None)
        self.item_ids = getattr(data, "item_ids", None)
        self._id_cache = ({}, {})

    def _by_id(self, side, wanted, call):
        """Indices of the file's ids `wanted` (users: side 0, items: 1): those the model
        has not seen lie past it (predicted from what is known)."""
        ids = self.user_ids if side == 0 else self.item_ids
        if ids is None:
            raise ValueError(f"mfact.{type(self).__name__}.{call}: ids=True, but the model "
                             "was fitted on a matrix without ids (read it with mfact.read(..., "
                             "user_col=, item_col=) or ids=True)")
        if "_id_cache" not in self.__dict__:
            self._id_cache = ({}, {})
        out, scalar, unseen = _ids.index(ids, self._id_cache[side], wanted)
        return (out[0] if scalar else np.array(out, np.int64)), unseen

    def save(self, path):
        """Write the fitted model to the file `path` (mf_model_save: the factors, the mean
        and the biases, with the algorithm's name and the parameters as "name=value" text;
        docs/model-file.md). The file is replaced whole or not at all. `mfact.load` reads
        it back, as does the mfact tool (`mfact predict`, `mfact recommend --model`)."""
        fn = _lib.mf_model_save
        if fn is None or _lib.mf_model_save_opts_init is None:
            raise _saved_models_missing("save")
        m = self._model()
        o = _lib.ModelSaveOpts()
        _lib.mf_model_save_opts_init(ctypes.byref(o))
        o.algorithm = self._ALGORITHM.encode()
        o.options = c_text(_options_text(self, m.k), f"mfact.{type(self).__name__}.save: options")
        if self._fw is not None:
            self._fw.sync_current()
        what = f"mfact.{type(self).__name__}.save"
        with self.ctx.lock, _ids.to_c(self.ctx, self.user_ids, what) as users, \
                _ids.to_c(self.ctx, self.item_ids, what) as items:
            o.user_ids, o.item_ids = users, items  # the ids, where the model has them
            check(fn(self.ctx.handle, ctypes.byref(m), ctypes.byref(o), c_path(path, what)),
                  self.ctx.handle, what)
        return self

    @classmethod
    def load(cls, path, ctx=None):
        """A fitted model of this class from a model file (see `mfact.load`, which picks the
        class from the file)."""
        return load(path, ctx=ctx, cls=cls)

    @property
    def _where(self):
        return _lib.MEMORY_DEVICE if self._fw is not None else _lib.MEMORY_HOST

    def _ids(self, ids, name, count, what, call):
        """Scalar or 1-D ids as a 1-D int32 array where the model lives, and whether the
        caller gave a scalar. Every id must be one of the model's `count` users or items
        (`what`): an IdError (an IndexError and a ValueError) names the first that is not,
        where the library would score an id it has not seen as zeros (or wrap one past
        int32)."""
        scalar = np.ndim(ids) == 0
        if scalar:
            ids = np.array([ids])
        if np.ndim(ids) != 1:
            raise ValueError(f"mfact: {name} must be an id or a 1-D array of ids")
        if self._fw is None:
            out = _checked_index(ids, "int32", name)
        else:
            out = _device_index(self._fw, on_device_any(ids, self._fw), name)
        n = int(out.shape[0])
        if n and (int(out.min()) < 0 or int(out.max()) >= count):
            host = out if self._fw is None else \
                out.cpu().numpy() if self._fw.name == "torch" else out.get()
            b = int(np.nonzero((host < 0) | (host >= count))[0][0])
            where = name if scalar else f"{name}[{b}]"
            v = int(host[b])
            state = "negative" if v < 0 else f"outside the model's {what} (0..{count - 1})"
            raise IdError(f"mfact.{type(self).__name__}.{call}: {where} = {v} is {state}")
        return out, scalar

    def _outputs(self, n, N):
        N = max(N, 0)  # the library refuses N < 1 with its own message
        if self._fw is None:
            return np.empty((n, N), np.int32), np.empty((n, N), np.float32)
        return self._fw.empty((n, N), np.int32), self._fw.empty((n, N), np.float32)

    def _call(self, fn, what):
        if self._fw is not None:
            self._fw.sync_current()
        with self.ctx.lock:
            check(fn(), self.ctx.handle, what)
            if self._fw is not None:
                self._fw.sync_stream(_lib.mf_ctx_stream(self.ctx.handle))

    def _gathered(self, m, ids):
        """The model restricted to the users `ids` (row b is user ids[b]; an id past the
        model's users gets zeros, as the library scores a user it has not seen), for
        per-call rows of user_items: the library excludes by user id."""
        U, V, bu, bi = m._keep
        n, fw = int(ids.shape[0]), self._fw
        if fw is None:
            lib, idx = np, ids.astype(np.int64)
            zeros = np.zeros
        else:
            lib = fw.torch if fw.name == "torch" else fw.cupy
            idx, zeros = fw.convert(ids, np.int64), fw.zeros
        if n and int(idx.min()) < 0:
            b = int(lib.nonzero(idx < 0)[0][0]) if fw is None or fw.name != "torch" else \
                int(lib.nonzero(idx < 0)[0, 0])
            raise InvalidData(f"mfact: recommend: userid[{b}] = {int(idx[b])} is negative")
        seen = idx < U.shape[0]
        Ug = zeros((n, U.shape[1]), np.float32)
        Ug[seen] = U[idx[seen]]
        bg = None
        if bu is not None:
            bg = zeros(n, np.float32)
            bg[seen] = bu[idx[seen]]
        local = np.arange(n, dtype=np.int32)
        local = local if fw is None else fw.asarray(local, np.int32)
        return _make_model(Ug, V, m.mean, bg, bi, m.where), local

    def recommend(self, userid, user_items=None, N=10, filter_already_liked_items=True,
                  ids=False):
        """The N best items for each user (implicit's recommend): (ids, scores), each users
        x N (1-D for one user), best first, ties to the smaller item id. With
        filter_already_liked_items, the items of `user_items` are never returned: a sparse
        matrix with one row per user of `userid` (implicit's convention), or None for the
        interactions the model was fitted to (kept by ImplicitALS.fit). A user with fewer
        than N candidates gets item -1 and score -inf in the places left. A negative id, and
        for ImplicitALS an id past the model's users (which it could not score), is an
        IdError (IndexError and ValueError) naming it; ALS and SGD score an unseen user by
        mean + item bias.

        ids=True: `userid` holds the file's user ids (the model's `user_ids`) and the items
        come back as the file's item ids (a NumPy object array, None where -1); a user the
        model has not seen is scored by mean + item bias (ALS, SGD) or is an IdError."""
        if ids:
            index, unseen = self._by_id(0, userid, "recommend")
            if unseen and not self._UNSEEN_USERS:
                raise IdError(f"mfact.{type(self).__name__}.recommend: user {unseen[0]!r} is "
                              "not one of the model's")
            items, scores = self.recommend(index, user_items, N, filter_already_liked_items)
            names = np.array(list(self.item_ids) + [None], dtype=object)
            host = np.asarray(items if self._fw is None else
                              (items.cpu().numpy() if self._fw.name == "torch" else items.get()))
            return names[np.where(host < 0, len(self.item_ids), host)], scores
        m = self._model()
        N = to_c(N, f"mfact.{type(self).__name__}.recommend: N")
        # An explicit model scores a user it has not seen by mean + item bias (the
        # library's rule); an implicit one has nothing to score it with: an error.
        users = 2**31 if self._UNSEEN_USERS else m.users
        ids, scalar = self._ids(userid, "userid", users, "users", "recommend")
        n = int(ids.shape[0])
        exclude = None
        if filter_already_liked_items:
            if user_items is None:
                if self._train is None:
                    raise ValueError(f"mfact.{type(self).__name__}.recommend: "
                                     "filter_already_liked_items needs user_items (one row "
                                     "per user id): this model keeps no training matrix")
                if self._train.ctx is not self.ctx:  # model.ctx set since (after unpickling)
                    self._train = as_matrix(self._train.to_scipy(), self.ctx)
                exclude = self._train
            else:
                exclude = as_matrix(user_items, self.ctx)
                if exclude.shape[0] != n:
                    raise ValueError(f"mfact: recommend: user_items has {exclude.shape[0]} "
                                     f"rows for {n} user ids (one row per user id)")
                # Row b is user ids[b]'s; the library reads row u as user u's.
                if self._fw is not None or not np.array_equal(ids, np.arange(n)):
                    m, ids = self._gathered(m, ids)
        items, scores = self._outputs(n, N)
        ex = exclude.handle if exclude is not None else None
        self._call(lambda: _lib.mf_recommend(self.ctx.handle, ctypes.byref(m), n, ptr(ids), ex,
                                             N, ptr(items), ptr(scores)), "recommend")
        return (items[0], scores[0]) if scalar else (items, scores)

    def similar_items(self, itemid, N=10):
        """The N items most similar to each item by the cosine of their factors (implicit's
        similar_items, except that the item itself is left out): (ids, scores) as
        recommend gives them."""
        m = self._model()
        N = to_c(N, f"mfact.{type(self).__name__}.similar_items: N")
        ids, scalar = self._ids(itemid, "itemid", m.items, "items", "similar_items")
        n = int(ids.shape[0])
        items, scores = self._outputs(n, N)
        self._call(lambda: _lib.mf_similar_items(self.ctx.handle, ctypes.byref(m), n, ptr(ids),
                                                 N, ptr(items), ptr(scores)),
                   "similar_items")
        return (items[0], scores[0]) if scalar else (items, scores)


class _Ratings(_Recommender):
    """What ALS and SGD share: the fitted explicit-ratings model and its predictions. A fit
    on a device matrix (CuPy, PyTorch) leaves its factors and biases on that device, as
    arrays of the same library; predictions then come back there too."""

    user_factors = item_factors = user_biases = item_biases = None
    mean = 0.0
    _UNSEEN_USERS = True

    def _model(self):
        if self.user_factors is None:
            raise RuntimeError(f"mfact.{type(self).__name__}: call fit first")
        # The attributes are public: take them as the C types (float32, C-contiguous,
        # shapes that agree), converted where they are not, kept alive with the model.
        U, V, bu, bi = _factor_arrays(self._fw, [
            (self.user_factors, "user_factors"), (self.item_factors, "item_factors"),
            (self.user_biases, "user_biases"), (self.item_biases, "item_biases")])
        if len(U.shape) != 2 or len(V.shape) != 2 or U.shape[1] != V.shape[1] or \
                tuple(bu.shape) != (U.shape[0],) or tuple(bi.shape) != (V.shape[0],):
            raise ValueError("mfact: user_factors (users x k), item_factors (items x k) and "
                             "the biases (users, items) do not agree")
        return _make_model(U, V, self.mean, bu, bi, self._where)

    def predict(self, users, items, ids=False, precision="fp32"):
        """Predicted ratings for the (user, item) pairs: arrays of equal length. Users and
        items the model has not seen predict from what it knows (the mean, one bias).
        ids=True: users and items are the file's ids (the model's `user_ids`, `item_ids`).
        precision: the dot products' arithmetic ("fp32", or "tf32", "bf16", "fp16": the
        factors rounded to that format, float sums; mf_model.precision)."""
        if ids:
            users = self._by_id(0, users, "predict")[0]
            items = self._by_id(1, items, "predict")[0]
            if np.ndim(users) == 0:
                return self.predict(np.array([users]), np.array([items]),
                                    precision=precision)[0]
        m = self._model()
        m.precision = _precision(precision, "predict")
        if self._fw is None:
            u = _checked_index(users, "int32", "users")
            i = _checked_index(items, "int32", "items")
        else:
            u = _device_index(self._fw, on_device_any(users, self._fw), "users")
            i = _device_index(self._fw, on_device_any(items, self._fw), "items")
        if tuple(u.shape) != tuple(i.shape) or len(u.shape) != 1:
            raise ValueError("mfact: users and items must be 1-D arrays of one length")
        if self._fw is None:
            out = np.empty(u.shape[0], np.float32)
        else:
            out = self._fw.empty(u.shape[0], np.float32)
            self._fw.sync_current()
        with self.ctx.lock:
            check(_lib.mf_predict_pairs(self.ctx.handle, ctypes.byref(m), u.shape[0], ptr(u),
                                        ptr(i), ptr(out)), self.ctx.handle, "predict")
        return out

    def rmse(self, ratings, precision="fp32"):
        """RMSE of the model's predictions over the stored entries of `ratings`. precision:
        the products' arithmetic, as predict takes it ("bf16" is 1.2-1.8x faster on a GPU
        from rank 128 on, each product within bf16's bound)."""
        R = as_matrix(ratings, self.ctx)
        m = self._model()
        m.precision = _precision(precision, "rmse")
        value = ctypes.c_double()
        with self.ctx.lock:
            check(_lib.mf_model_rmse(self.ctx.handle, ctypes.byref(m), R.handle,
                                     ctypes.byref(value)), self.ctx.handle, "rmse")
        return value.value

    def _fit(self, R, T, o, total, unit, run, what):
        """The run shared by ALS and SGD: outputs made uninitialized (the library writes
        every element, the biases too, zeros without biases; np.zeros of the factors cost
        21 ms of a 0.58 s fit on the H100), kept only when the run produced them."""
        users, items = R.shape
        fw = R.framework
        empty = np.empty if fw is None else fw.empty
        k = _out_rank(o.rank)
        U, V = empty((users, k), np.float32), empty((items, k), np.float32)
        bu, bi = empty(users, np.float32), empty(items, np.float32)
        if fw is not None:
            fw.sync_current()
        b = _lib.Biases()
        b.user, b.item = ptr(bu), ptr(bi)
        o.bias_out = ctypes.pointer(b)
        o.test = T.handle if T is not None else None
        where = _lib.MEMORY_DEVICE if fw is not None else _lib.MEMORY_HOST
        with _progress.sigint() as sig, self.ctx.lock:
            tracker = _progress.tracker(sig, total, unit, _bar(self.ctx, self.show_progress),
                                        self.callback,
                                        ("iteration", "seconds", "train_rmse", "test_rmse"))
            o.progress = _progress.make(_lib.PROGRESS_FN, tracker)
            status, rep = run(self.ctx.handle, R.handle, o, ptr(U), ptr(V), where)
            if tracker is not None:
                tracker.close()
            if status in (0, Cancelled.status):  # the factors of the last completed step
                self._fw = fw
                self.user_factors, self.item_factors = U, V
                self.user_biases, self.item_biases = bu, bi
                self.mean = float(b.mean)
                self.report = _report(rep)
                self.history = tracker.records if tracker is not None else None
            if tracker is not None:
                status = tracker.settle(status, Cancelled.status)
            check(status, self.ctx.handle, what)
        return rep


class ALS(_Ratings):
    """Alternating least squares with biases (mf_als_run)."""

    _ALGORITHM = "als"

    def __init__(self, rank=None, lambda_=None, iterations=None, init=None, biases=None,
                 lambda_bias=None, weighting=None, solver=None, cg_steps=None, tune=None,
                 show_progress=False, callback=None, ctx=None, tf32=None, rmse_precision=None,
                 layout=None):
        self.rank, self.lambda_, self.iterations, self.init = rank, lambda_, iterations, init
        self.biases, self.lambda_bias, self.weighting = biases, lambda_bias, weighting
        self.solver, self.cg_steps, self.tune = solver, cg_steps, tune
        self.tf32, self.rmse_precision = tf32, rmse_precision
        # in a group: "replicated" U on every rank, or "sharded" (each rank its users' rows;
        # the item systems summed); "auto" (None) by bytes (mfact.h's mf_als_layout)
        self.layout = layout
        self.show_progress, self.callback = show_progress, callback
        self.ctx = resolve(ctx)
        self.report = None

    def _opts(self):
        o = _lib.AlsOpts()
        _lib.mf_als_opts_init(ctypes.byref(o))
        _set_ints(o, self, ("rank", "iterations", "cg_steps"))
        if self.lambda_ is not None:
            o.lambda_ = float(self.lambda_)
        if self.init is not None:
            o.init = _choice(_ALS_INIT, self.init, "init")
        if self.biases is not None:
            o.biases = 1 if self.biases else 0
        if self.lambda_bias is not None:
            o.lambda_bias = float(self.lambda_bias)
        if self.weighting is not None:
            o.weighting = _choice(_WEIGHTING, self.weighting, "weighting")
        if self.solver is not None:
            o.solver = _choice(_SOLVER, self.solver, "solver")
        if self.tf32 is not None:
            o.tf32 = 1 if self.tf32 else 0
        if self.rmse_precision is not None:
            o.rmse_precision = _precision(self.rmse_precision, "ALS")
        if self.layout is not None:
            o.layout = _choice(_LAYOUT, self.layout, "layout")
        o.tune = _choice(_TUNE, self.tune, "tune")
        return o

    def fit(self, ratings, test=None):
        """Fit to `ratings` (users x items: scipy.sparse, a dense array, or mfact.Matrix);
        `test`, a held-out matrix of the same shape, is scored after every iteration."""
        R = as_matrix(ratings, self.ctx)
        self._keep_ids(ratings)
        T = as_matrix(test, self.ctx) if test is not None else None
        o = self._opts()

        def run(ctx, r, opts, U, V, where):
            rep = _lib.AlsReport()
            rep.struct_size = ctypes.sizeof(rep)
            st = _lib.mf_als_run(ctx, r, ctypes.byref(opts), U, V, where, ctypes.byref(rep))
            return st, rep

        rep = self._fit(R, T, o, o.iterations, "it", run, "mfact.ALS.fit")
        self.report["solver"] = _SOLVER_NAMES.get(rep.solver, rep.solver)
        self.report["layout"] = _LAYOUT_NAMES.get(rep.layout, rep.layout)
        return self


class SGD(_Ratings):
    """Lock-free (Hogwild) SGD with Koren's biases (mf_sgd_hogwild_run)."""

    _ALGORITHM = "sgd"

    def __init__(self, rank=None, learning_rate=None, schedule=None, decay=None, lambda_u=None,
                 lambda_v=None, epochs=None, storage=None, workers=None, biases=None,
                 lambda_bias=None, tune=None, show_progress=False, callback=None, ctx=None):
        self.rank, self.learning_rate, self.schedule, self.decay = (rank, learning_rate,
                                                                    schedule, decay)
        self.lambda_u, self.lambda_v, self.epochs, self.storage = (lambda_u, lambda_v, epochs,
                                                                   storage)
        self.workers, self.biases, self.lambda_bias, self.tune = (workers, biases,
                                                                  lambda_bias, tune)
        self.show_progress, self.callback = show_progress, callback
        self.ctx = resolve(ctx)
        self.report = None

    def _opts(self):
        o = _lib.SgdOpts()
        _lib.mf_sgd_opts_init(ctypes.byref(o))
        _set_ints(o, self, ("rank", "epochs", "workers"))
        for name in ("learning_rate", "decay", "lambda_u", "lambda_v", "lambda_bias"):
            if getattr(self, name) is not None:
                setattr(o, name, float(getattr(self, name)))
        if self.schedule is not None:
            o.schedule = _choice(_SGD_SCHEDULE, self.schedule, "schedule")
        if self.storage is not None:
            o.storage = _choice(_SGD_STORAGE, self.storage, "storage")
        if self.biases is not None:
            o.biases = 1 if self.biases else 0
        o.tune = _choice(_TUNE, self.tune, "tune")
        return o

    def fit(self, ratings, test=None):
        """As ALS.fit; one progress step per epoch."""
        R = as_matrix(ratings, self.ctx)
        self._keep_ids(ratings)
        T = as_matrix(test, self.ctx) if test is not None else None
        o = self._opts()

        def run(ctx, r, opts, U, V, where):
            rep = _lib.SgdReport()
            rep.struct_size = ctypes.sizeof(rep)
            st = _lib.mf_sgd_hogwild_run(ctx, r, ctypes.byref(opts), U, V, where,
                                         ctypes.byref(rep))
            return st, rep

        self._fit(R, T, o, o.epochs, "epoch", run, "mfact.SGD.fit")
        return self


class ImplicitALS(_Recommender):
    """Implicit-feedback ALS (mf_ials_run; Hu, Koren & Volinsky 2008) with implicit's
    method names: fit, recommend, similar_items, recalculate_user. A stored interaction r
    (a play count; values >= 0) has the confidence c = 1 + alpha r (confidence="linear") or
    1 + alpha log(1 + r / epsilon) ("log"); unstored pairs have c = 1 and preference 0.
    The model has no biases: a score is user_factors[u] . item_factors[i]. The matrix given
    to fit is kept (`recommend` filters its items by default). fp16=True keeps the factors
    in half precision during the run (half the memory; mf_ials_opts.fp16)."""

    _ALGORITHM = "ials"

    def __init__(self, rank=None, lambda_=None, alpha=None, confidence=None, epsilon=None,
                 iterations=None, solver=None, cg_steps=None, fp16=False, ctx=None):
        self.rank, self.lambda_, self.alpha = rank, lambda_, alpha
        self.fp16 = bool(fp16)
        self.confidence, self.epsilon, self.iterations = confidence, epsilon, iterations
        self.solver, self.cg_steps = solver, cg_steps
        self.ctx = resolve(ctx)
        self.user_factors = self.item_factors = None
        self.report = self.history = None

    def _opts(self):
        o = _lib.IalsOpts()
        _lib.mf_ials_opts_init(ctypes.byref(o))
        _set_ints(o, self, ("rank", "iterations", "cg_steps"))
        for name in ("lambda_", "alpha", "epsilon"):
            if getattr(self, name) is not None:
                setattr(o, name, float(getattr(self, name)))
        if self.confidence is not None:
            o.confidence = _choice(_IALS_CONFIDENCE, self.confidence, "confidence")
        if self.solver is not None:
            o.solver = _choice(_SOLVER, self.solver, "solver")
        o.fp16 = int(self.fp16)
        return o

    def fit(self, interactions, show_progress=False, callback=None):
        """Fit to `interactions` (users x items: scipy.sparse, a dense array, mfact.Matrix,
        or CuPy / PyTorch on the device, where the factors then stay). `callback(record)`
        after every iteration (iteration, seconds, loss: the objective over users x items
        pairs; asking for it makes the library compute it); returning True stops the run."""
        R = as_matrix(interactions, self.ctx)
        self._keep_ids(interactions)
        o = self._opts()
        users, items = R.shape
        fw = R.framework
        empty = np.empty if fw is None else fw.empty
        k = _out_rank(o.rank)  # the library names a bad rank
        U, V = empty((users, k), np.float32), empty((items, k), np.float32)
        if fw is not None:
            fw.sync_current()
        rep = _lib.IalsReport()
        rep.struct_size = ctypes.sizeof(rep)
        where = _lib.MEMORY_DEVICE if fw is not None else _lib.MEMORY_HOST
        with _progress.sigint() as sig, self.ctx.lock:
            tracker = _progress.tracker(sig, o.iterations, "it", _bar(self.ctx, show_progress),
                                        callback,
                                        ("iteration", "seconds", ("loss", "train_rmse")))
            o.progress = _progress.make(_lib.PROGRESS_FN, tracker)
            status = _lib.mf_ials_run(self.ctx.handle, R.handle, ctypes.byref(o), ptr(U),
                                      ptr(V), where, ctypes.byref(rep))
            if tracker is not None:
                tracker.close()
            if status in (0, Cancelled.status):  # the factors of the last completed step
                self._fw, self._train = fw, R
                self.user_factors, self.item_factors = U, V
                self.report = _report(rep)
                self.report["solver"] = _SOLVER_NAMES.get(rep.solver, rep.solver)
                self.history = tracker.records if tracker is not None else None
            if tracker is not None:
                status = tracker.settle(status, Cancelled.status)
            check(status, self.ctx.handle, "mfact.ImplicitALS.fit")
        return self

    def _item_factors(self):
        if self.item_factors is None:
            raise RuntimeError("mfact.ImplicitALS: call fit first")
        V, = _factor_arrays(self._fw, [(self.item_factors, "item_factors")])
        if len(V.shape) != 2:
            raise ValueError("mfact: item_factors must be items x k")
        return V

    def _model(self):
        V = self._item_factors()
        if self.user_factors is None:
            raise RuntimeError("mfact.ImplicitALS: call fit first")
        U, = _factor_arrays(self._fw, [(self.user_factors, "user_factors")])
        if len(U.shape) != 2 or U.shape[1] != V.shape[1]:
            raise ValueError("mfact: user_factors (users x k) and item_factors (items x k) "
                             "do not agree")
        return _make_model(U, V, 0.0, None, None, self._where)

    def recalculate_user(self, userid, user_items):
        """Factors for users from their interactions against the fitted item factors
        (mf_ials_fold_in; implicit's recalculate_user): `user_items` has one row per user of
        `userid` (an id or an array; the ids only shape the result) and the model's items
        as columns. Returns users x k (k for one id), where the model's factors live. A
        training user's row is what the run's last user half-step would compute."""
        V = self._item_factors()
        scalar = np.ndim(userid) == 0
        n = 1 if scalar else len(userid)
        M = as_matrix(user_items, self.ctx)
        if M.shape != (n, V.shape[0]):
            raise ValueError(f"mfact: recalculate_user: user_items is {M.shape[0]} x "
                             f"{M.shape[1]}, not one row per user id by the model's items "
                             f"({n} x {V.shape[0]})")
        o = self._opts()
        o.rank = V.shape[1]
        out = np.empty((n, V.shape[1]), np.float32) if self._fw is None else \
            self._fw.empty((n, V.shape[1]), np.float32)
        self._call(lambda: _lib.mf_ials_fold_in(self.ctx.handle, M.handle, ctypes.byref(o),
                                                ptr(V), ptr(out), self._where),
                   "mfact.ImplicitALS.recalculate_user")
        return out[0] if scalar else out


# ---- model files ----------------------------------------------------------------------------
_NOT_OPTIONS = ("ctx", "callback", "show_progress")


def _saved_models_missing(what):
    from ._errors import Unsupported
    return Unsupported(f"mfact: the loaded libmfact ({_lib.library_path}) has no saved models "
                       f"(mf_model_save, mf_model_load): {what} needs a newer library")


def _options_text(model, k):
    """The parameters given (None: the library's default, left out) as the tool writes its
    options: "rank=32 lambda=0.05 ...", C's names (lambda_ is lambda), rank the model's."""
    words = [f"rank={k}"]
    for name, value in model.get_params().items():
        if name in _NOT_OPTIONS or name == "rank" or value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (int, np.integer)):
            text = str(int(value))
        elif isinstance(value, (float, np.floating)):
            text = repr(float(value))
        elif isinstance(value, str) and value and not any(c.isspace() for c in value):
            text = value
        else:
            continue  # not a value the text can carry
        words.append(f"{name.rstrip('_')}={text}")
    return " ".join(words)


def _parse_options(text, cls):
    """The "name=value" words of a model file's options that are `cls`'s parameters, as
    Python values (the tool's files too: rank, lambda, iterations, ...; index_base and other
    words that are not parameters are left out)."""
    names = {n.rstrip("_"): n for n in cls._param_names() if n not in _NOT_OPTIONS}
    out = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if not eq or key not in names:
            continue
        if value in ("true", "false"):
            out[names[key]] = value == "true"
            continue
        for conv in (int, float):
            try:
                out[names[key]] = conv(value)
                break
            except ValueError:
                pass
        else:
            out[names[key]] = value
    return out


def _host_array(address, shape):
    """A NumPy copy of `shape` floats at `address` (the saved model's, freed after)."""
    n = int(np.prod(shape))
    buf = (ctypes.c_float * n).from_address(address)
    return np.frombuffer(buf, np.float32, n).reshape(shape).copy()


def load(path, ctx=None, cls=None):
    """A fitted model from a model file (mf_model_load; one that `model.save` or the mfact
    tool's --save-model wrote): an ALS, SGD or ImplicitALS as the file's algorithm says (a
    file that names none: ALS when it has biases, else ImplicitALS), its parameters from
    the file's options, its factors (NumPy, on the host) predicting and recommending as the
    saved model did. `saved` holds what the file says besides: {"algorithm", "options",
    "library_version"}. A file that is not a whole, valid model is mfact.InvalidData with
    the library's message (what is wrong, at which byte or section); one that cannot be
    read, mfact.FileError; one of a newer format, mfact.Unsupported. An ImplicitALS keeps
    no training matrix: recommend then filters through `user_items`."""
    fn = _lib.mf_model_load
    if fn is None:
        raise _saved_models_missing("load")
    ctx = resolve(ctx)
    handle = ctypes.c_void_p()
    with ctx.lock:
        check(fn(ctx.handle, c_path(path, "mfact.load"), ctypes.byref(handle)), ctx.handle,
              "mfact.load")
    try:
        view = _lib.Model()
        _lib.mf_model_init(ctypes.byref(view))
        check(_lib.mf_saved_model_view(handle, ctypes.byref(view)), None, "mfact.load")
        info = {"algorithm": _lib.mf_saved_model_algorithm(handle).decode("utf-8", "replace"),
                "options": _lib.mf_saved_model_options(handle).decode("utf-8", "replace"),
                "library_version":
                    _lib.mf_saved_model_library_version(handle).decode("utf-8", "replace")}
        users, items, k = view.users, view.items, view.k
        U = _host_array(view.U, (users, k))
        V = _host_array(view.V, (items, k))
        bu = _host_array(view.user_bias, (users,)) if view.user_bias else None
        bi = _host_array(view.item_bias, (items,)) if view.item_bias else None
        mean = float(view.mean)
        ids = _lib.mf_saved_model_user_ids is not None
        user_ids = _ids.from_c(_lib.mf_saved_model_user_ids(handle)) if ids else None
        item_ids = _ids.from_c(_lib.mf_saved_model_item_ids(handle)) if ids else None
    finally:
        _lib.mf_saved_model_destroy(handle)
    if cls is None:
        cls = {"als": ALS, "sgd": SGD, "ials": ImplicitALS}.get(info["algorithm"]) or \
            (ALS if bu is not None or bi is not None or mean != 0.0 else ImplicitALS)
    model = cls(ctx=ctx, **_parse_options(info["options"], cls))
    model.user_factors, model.item_factors = U, V
    if isinstance(model, _Ratings):  # a file without biases: zeros, as a fit without them
        model.user_biases = bu if bu is not None else np.zeros(users, np.float32)
        model.item_biases = bi if bi is not None else np.zeros(items, np.float32)
        model.mean = mean
    model.saved = info
    model.user_ids, model.item_ids = user_ids, item_ids
    return model


def ranking_metrics(model_or_factors, train, test, K=10, ctx=None):
    """Ranking quality on held-out interactions as implicit's ranking_metrics_at_k
    computes it (mf_ranking_evaluate): for each user with items in `test`, the top K
    recommendations leaving out its `train` items (None: nothing left out), scored as
    precision@K, MAP@K, NDCG@K and AUC. `model_or_factors` is a fitted mfact model or a
    (user_factors, item_factors) pair (NumPy, or device arrays of one library). Returns
    dict(precision, map, ndcg, auc)."""
    if isinstance(model_or_factors, _Recommender):
        model = model_or_factors
        if ctx is not None and ctx is not model.ctx:
            raise ValueError("mfact.ranking_metrics: the model belongs to another Context")
        ctx, fw, m = model.ctx, model._fw, model._model()
    else:
        from .ops import _framework
        try:
            U, V = model_or_factors
        except (TypeError, ValueError):
            raise ValueError("mfact.ranking_metrics: pass a fitted model or a "
                             "(user_factors, item_factors) pair") from None
        ctx, fw = resolve(ctx), _framework(U, V)
        U, V = _factor_arrays(fw, [(U, "user_factors"), (V, "item_factors")])
        if len(U.shape) != 2 or len(V.shape) != 2 or U.shape[1] != V.shape[1]:
            raise ValueError("mfact.ranking_metrics: user_factors (users x k) and "
                             "item_factors (items x k) do not agree")
        m = _make_model(U, V, 0.0, None, None,
                        _lib.MEMORY_HOST if fw is None else _lib.MEMORY_DEVICE)
    K = to_c(K, "mfact.ranking_metrics: K")
    T = as_matrix(test, ctx)
    Tr = as_matrix(train, ctx) if train is not None else None
    r = _lib.Ranking()
    r.struct_size = ctypes.sizeof(r)
    if fw is not None:
        fw.sync_current()
    with ctx.lock:
        check(_lib.mf_ranking_evaluate(ctx.handle, ctypes.byref(m),
                                       Tr.handle if Tr is not None else None, T.handle, K,
                                       ctypes.byref(r)), ctx.handle, "mfact.ranking_metrics")
    return {"precision": r.precision, "map": r.map, "ndcg": r.ndcg, "auc": r.auc}


class BMF(_Estimator):
    """Boolean matrix factorization (mf_bmf_run): C ~ A o B over ({0, 1}, OR, AND). After
    fit, `A` (rows x rank) and `B` (rank x cols) are NumPy bool arrays and the report's
    fields (error, relative_error, precision, recall, f1, ...) are attributes too."""

    def __init__(self, rank=None, instances=None, max_sweeps=None, patience=None,
                 target_error=None, time_limit=None, weight=None, weight_decay=None,
                 weight_floor=None, init=None, show_progress=False, callback=None, ctx=None):
        self.rank, self.instances, self.max_sweeps, self.patience = (rank, instances,
                                                                     max_sweeps, patience)
        self.target_error, self.time_limit = target_error, time_limit
        self.weight, self.weight_decay, self.weight_floor = weight, weight_decay, weight_floor
        self.init = init
        self.show_progress, self.callback = show_progress, callback
        self.ctx = resolve(ctx)
        self.A = self.B = self.report = None

    def _opts(self):
        o = _lib.BmfOpts()
        _lib.mf_bmf_opts_init(ctypes.byref(o))
        _set_ints(o, self, ("rank", "instances", "max_sweeps", "patience"))
        for name in ("target_error", "time_limit", "weight", "weight_decay", "weight_floor"):
            if getattr(self, name) is not None:
                setattr(o, name, float(getattr(self, name)))
        if self.init is not None:
            o.init = _choice(_BMF_INIT, self.init, "init")
        return o

    def fit(self, C):
        """Factor the pattern of C (its stored entries are the ones)."""
        M = as_matrix(C, self.ctx, pattern=True)
        o = self._opts()
        rows, cols = M.shape
        w = (_out_rank(o.rank) + 63) // 64
        A_bits = np.zeros((rows, w), np.uint64)
        B_bits = np.zeros((cols, w), np.uint64)
        rep = _lib.BmfReport()
        rep.struct_size = ctypes.sizeof(rep)
        self.A = self.B = self.report = None  # a failed fit leaves no earlier result behind
        with _progress.sigint() as sig, self.ctx.lock:
            tracker = _progress.tracker(sig, o.max_sweeps, "sweep", self.show_progress,
                                        self.callback, ("sweep", "seconds", "error",
                                                        "relative_error", "f1", "start_done"))
            o.progress = _progress.make(_lib.BMF_PROGRESS_FN, tracker)
            status = _lib.mf_bmf_run(self.ctx.handle, M.handle, ctypes.byref(o), ptr(A_bits),
                                     ptr(B_bits), _lib.MEMORY_HOST, ctypes.byref(rep))
            if tracker is not None:
                tracker.close()
                status = tracker.settle(status, Cancelled.status)
            check(status, self.ctx.handle, "mfact.BMF.fit")
        self.A = _unpack(A_bits, o.rank)
        self.B = _unpack(B_bits, o.rank).T.copy()
        self.report = _report(rep)
        for key, value in self.report.items():
            setattr(self, key, value)
        return self

    def reconstruct(self):
        """A o B as a dense bool array (rows x cols)."""
        return (self.A.astype(np.uint8) @ self.B.astype(np.uint8)) > 0


def _unpack(bits, k):
    """Lines of packed words (factor l: bit l % 64 of word l // 64) as a bool array."""
    as_bytes = bits.astype("<u8").view(np.uint8).reshape(bits.shape[0], -1)
    return np.unpackbits(as_bytes, axis=1, bitorder="little")[:, :k].astype(bool)


_ASD_VARIANT = {"plain": 0, "scaled": 1}
_ASD_INIT = {"random": 0, "spectral": 2}
_ASD_STOP = {0: "tolerance", 1: "stagnation", 2: "max_iterations", 3: "time_limit",
             4: "cancelled"}


def complete(observed, rank=None, variant=None, tolerance=None, stagnation_window=None,
             stagnation_rate=None, max_iterations=None, time_limit=None, init=None,
             rank_continuation=None, test=None, show_progress=False, callback=None,
             ctx=None, precision=None):
    """Low-rank matrix completion by alternating steepest descent (mf_asd_run): X (rows x
    rank) and Y (cols x rank) with X @ Y.T matching `observed` on its stored entries.
    Returns (X, Y, report); on a device matrix X and Y are device arrays of its library.
    The progress records carry the relative residual as `train_rmse`. precision: "bf16" or
    "fp16" starts in a reduced phase (mf_asd_opts.precision; the result meets the same
    tolerance, report["reduced_iterations"] counts it); default float."""
    ctx = resolve(ctx)
    M = as_matrix(observed, ctx)
    T = as_matrix(test, ctx) if test is not None else None
    o = _lib.AsdOpts()
    _lib.mf_asd_opts_init(ctypes.byref(o))
    given = {"rank": rank, "stagnation_window": stagnation_window,
             "max_iterations": max_iterations, "rank_continuation": rank_continuation,
             "tolerance": tolerance, "stagnation_rate": stagnation_rate,
             "time_limit": time_limit}
    for name, value in given.items():
        if value is None:
            continue
        if isinstance(getattr(o, name), int):
            setattr(o, name, to_c(value, f"mfact.complete: {name}"))
        else:
            setattr(o, name, float(value))
    if variant is not None:
        o.variant = _choice(_ASD_VARIANT, variant, "variant")
    if init is not None:
        o.init = _choice(_ASD_INIT, init, "init")
    if precision is not None:
        o.precision = _precision(precision, "complete")
    o.test = T.handle if T is not None else None
    fw = M.framework
    zeros = np.zeros if fw is None else fw.zeros
    X = zeros((M.shape[0], _out_rank(o.rank)), np.float32)
    Y = zeros((M.shape[1], _out_rank(o.rank)), np.float32)
    if fw is not None:
        fw.sync_current()
    rep = _lib.AsdReport()
    rep.struct_size = ctypes.sizeof(rep)
    with _progress.sigint() as sig, ctx.lock:
        tracker = _progress.tracker(sig, o.max_iterations, "it", _bar(ctx, show_progress),
                                    callback,
                                    ("iteration", "seconds", "train_rmse", "test_rmse"))
        o.progress = _progress.make(_lib.PROGRESS_FN, tracker)
        status = _lib.mf_asd_run(ctx.handle, M.handle, ctypes.byref(o), ptr(X), ptr(Y),
                                 _lib.MEMORY_HOST if fw is None else _lib.MEMORY_DEVICE,
                                 ctypes.byref(rep))
        if tracker is not None:
            tracker.close()
            status = tracker.settle(status, Cancelled.status)
        check(status, ctx.handle, "mfact.complete")
    report = _report(rep)
    report["stopped"] = _ASD_STOP.get(rep.stopped, rep.stopped)
    if tracker is not None and tracker.records is not None:
        report["history"] = tracker.records
    return X, Y, report
