// The torch.distributed hook's record path, in C++ (python/hangtrace_torch.py
// loads it beside itself and falls back to ctypes where it cannot).
//
// A torch call the hook wraps costs, per call, what it takes to find the
// call's arguments, its group's entry and its codes, and to call the
// library twice. Through a Python wrapper and ctypes that was about 4.8 us
// (bench/bench_torch.sh, one rank): more than a small NCCL collective's
// launch. Here the record path is a C callable (vectorcall; the wrapper
// torch.distributed exports is a one-line Python function in front of it,
// a function as torch's own is) that reads the
// arguments at positions hangtrace_torch.py located once per function,
// looks the group, dtype and reduction up in the dicts the Python module
// fills, and calls hangtrace_call_begin/_end directly. Whatever is rare or
// needs torch's Python API (a group seen the first time, a reduction not
// seen yet, a call's id, a posted call's work) is done by the Python
// module's own functions, called from here: one implementation of each.
//
// Nothing here may harm the program: the real function is called exactly
// once with the arguments it was given, its result or exception returned
// untouched; a failure of the bookkeeping is said once (the module's
// _warn) and that call goes untraced.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <structmember.h>

#include <cstddef>
#include <cstdint>

#if PY_VERSION_HEX < 0x03090000
#error "_hangtrace_torch needs Python 3.9 or later (vectorcall in type specs); the hook falls back to ctypes"
#endif

namespace {

using CallBegin = int (*)(int call, int comm, int peer, int tag, uint64_t count, int dtype, int redop,
                          uint64_t handle);
using CallEnd = int (*)(int result, int peer, int tag);
using RequestEnd = int (*)(uint64_t handle, int peer, int tag);
using CallNotIssued = int (*)();
using RequestNotIssued = int (*)(uint64_t handle);

constexpr int kAnyPeer = -2;     // hangtrace.h: any source, resolved at the end
constexpr int kUnknownCode = 255;  // a dtype or reduction without a code

// What setup() was given: the library's entry points and the Python
// module's tables and functions (strong references, for the process's life).
struct Hook {
  CallBegin call_begin = nullptr;
  CallEnd call_end = nullptr;
  RequestEnd request_end = nullptr;
  // Optional (older libraries lack them): a refused call then ends failed.
  CallNotIssued call_not_issued = nullptr;
  RequestNotIssued request_not_issued = nullptr;
  PyObject* groups = nullptr;       // dict: process group -> _Group(comm, index_of), or None (no member)
  PyObject* group_of = nullptr;     // _group_of(pg): registers a group seen the first time
  PyObject* dtype_codes = nullptr;  // dict: torch.dtype -> Dtype
  PyObject* redop_codes = nullptr;  // dict: ReduceOp -> Redop, filled by redop_of
  PyObject* redop_of = nullptr;     // _redop(op)
  PyObject* call_id = nullptr;      // _call_id(name, op, flags)
  PyObject* post = nullptr;         // _post(work, entry): remembers a posted call's work
  PyObject* posted = nullptr;       // dict: the posted calls' works (Work.wait's fast path reads its size)
  PyObject* warn = nullptr;         // _warn(what, exception): said once
  PyObject* non_member = nullptr;   // GroupMember.NON_GROUP_MEMBER (or an object nothing passes)
  PyObject* default_group = nullptr;  // the default group's entry once known; forget_default_group() drops it
  PyObject* last_dtype = nullptr;   // the last tensor's dtype, and its code
  int last_dtype_code = 0;
  PyObject* numel = nullptr;        // interned names
  PyObject* dtype = nullptr;
  PyObject* calls_are = nullptr;    // "calls are", for _warn
  uint64_t next_handle = 1;         // names posted calls (the GIL orders its users)
};
Hook hook;

// A wrapped call's own calls into torch.distributed (broadcast_object_list's
// broadcasts) are part of it: not recorded again.
thread_local bool inside = false;
// Works waited on inside wrapped calls (Method's calls while `inside`): a
// blocking call that raised without waiting on one was refused before
// torch issued it (its own checks, its backend's: an invalid root, a
// tensor of the wrong kind), and took no sequence number of torch's.
thread_local uint64_t waits_inside = 0;

// The arguments a call's record needs, by the order of Call::at/key/fallback.
enum Arg { kGroup, kAsync, kPeer, kTag, kData, kOp, kArgs };

// One wrapped torch.distributed function (hangtrace_torch._wrap says what
// each field holds; it computes them once per function).
struct Call {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* real;
  PyObject* names[2];         // the call's name when blocking, when posting
  PyObject* op;               // its op's name ("allreduce"), for _call_id
  int call_ids[2];            // registered on first use; -1 before
  unsigned flags[2];          // CallFlags when blocking, when posting
  bool always_posting;        // isend, irecv
  bool has_peer;              // a root (collectives) or a peer (send/recv)
  bool p2p;                   // send/recv: the tag is recorded
  bool has_data, has_op;
  bool waits_on_work;         // blocking, it waits on a Work (monitored_barrier does not)
  Py_ssize_t at[kArgs];       // positional index of each argument (PY_SSIZE_T_MAX: keyword only or none)
  PyObject* key[kArgs];       // its keyword (interned), or nullptr
  PyObject* fallback[kArgs];  // its default when not passed (None where the function has none)
  PyObject* group_peer_key;   // torch 2.6+'s "group_src"/"group_dst" (a rank in the group), or nullptr
  PyObject* last_op;          // the reduction of the last call, and its Redop
  int last_redop;
};

// A method of torch's Work that ends posted calls (wait): while no call is
// posted, the real method at once; else the Python wrapper that ends it.
struct Method {
  PyObject_HEAD
  PyObject* dict;             // __dict__: functools.update_wrapper's attributes (__wrapped__, __name__, ...)
  vectorcallfunc vectorcall;
  PyObject* real;
  PyObject* slow;
};

// The value of a keyword argument in a vectorcall, or nullptr.
PyObject* Keyword(PyObject* name, PyObject* const* values, PyObject* kwnames) {
  const Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (PyTuple_GET_ITEM(kwnames, i) == name) return values[i];  // interned both: the usual case
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* k = PyTuple_GET_ITEM(kwnames, i);
    if (PyUnicode_Check(k) && PyUnicode_Compare(k, name) == 0) return values[i];
  }
  return nullptr;
}

// The argument `which` as the function will see it (borrowed).
PyObject* Argument(const Call* c, Arg which, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (c->at[which] < nargs) return args[c->at[which]];
  if (kwnames != nullptr && c->key[which] != nullptr) {
    if (PyObject* v = Keyword(c->key[which], args + nargs, kwnames)) return v;
  }
  return c->fallback[which];
}

// int(value); false with an exception set where it has none.
bool AsInt(PyObject* value, long* out) {
  PyObject* n = PyNumber_Long(value);
  if (n == nullptr) return false;
  *out = PyLong_AsLong(n);
  Py_DECREF(n);
  return !(*out == -1 && PyErr_Occurred());
}

// index_of.get(int(global_rank), -1): the rank in the group.
bool GroupRank(PyObject* index_of, PyObject* global_rank, int* out) {
  PyObject* n = PyNumber_Long(global_rank);
  if (n == nullptr) return false;
  PyObject* v = PyDict_GetItemWithError(index_of, n);
  Py_DECREF(n);
  if (v == nullptr) {
    *out = -1;
    return !PyErr_Occurred();
  }
  *out = int(PyLong_AsLong(v));
  return true;
}

// The group's entry: a new reference to a _Group, Py_None where this rank
// is no member, nullptr with an exception set.
PyObject* GroupOf(PyObject* pg) {
  if (pg == Py_None) {
    if (hook.default_group == nullptr) {
      PyObject* g = PyObject_CallOneArg(hook.group_of, Py_None);
      if (g == nullptr || g == Py_None) return g;
      hook.default_group = g;  // torch keeps it until destroy_process_group, which forgets it here
    }
    Py_INCREF(hook.default_group);
    return hook.default_group;
  }
  if (pg == hook.non_member) Py_RETURN_NONE;  // a group this rank is not in: torch returns at once
  if (PyObject* g = PyDict_GetItemWithError(hook.groups, pg)) {
    Py_INCREF(g);
    return g;
  }
  if (PyErr_Occurred()) return nullptr;
  return PyObject_CallOneArg(hook.group_of, pg);
}

// _numel_dtype(data): element count and Dtype of a tensor, or of a list's
// first tensor; a list of objects counts its objects.
bool NumelDtype(PyObject* data, uint64_t* count, int* dtype) {
  *count = 0;
  *dtype = 0;
  if (PyList_CheckExact(data) || PyTuple_CheckExact(data)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(data);
    if (n == 0) return true;
    PyObject* first = PySequence_Fast_GET_ITEM(data, 0);
    const int has_numel = PyObject_HasAttr(first, hook.numel);  // hasattr: its errors are a no
    if (!has_numel) {
      *count = uint64_t(n);
      return true;
    }
    data = first;
  }
  PyObject* type = PyObject_GetAttr(data, hook.dtype);
  if (type == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return false;
    PyErr_Clear();
    return true;
  }
  if (type == Py_None) {
    Py_DECREF(type);
    return true;
  }
  int code_of_type;  // read before numel(), whose Python code (a subclass's) may run another thread's call
  if (type != hook.last_dtype) {  // torch's dtypes are singletons: by identity first
    PyObject* code = PyDict_GetItemWithError(hook.dtype_codes, type);
    if (code == nullptr && PyErr_Occurred()) {
      Py_DECREF(type);
      return false;
    }
    // Both set before the old one is let go (whose release may run Python
    // code, and another thread's call): the pair stays consistent. The
    // reference keeps the address its own.
    PyObject* old = hook.last_dtype;
    hook.last_dtype = type;
    hook.last_dtype_code = code_of_type = code != nullptr ? int(PyLong_AsLong(code)) : kUnknownCode;
    Py_XDECREF(old);
  } else {
    code_of_type = hook.last_dtype_code;
    Py_DECREF(type);
  }
  PyObject* n = PyObject_CallMethodNoArgs(data, hook.numel);
  if (n == nullptr) return false;
  const unsigned long long value = PyLong_AsUnsignedLongLong(n);
  Py_DECREF(n);
  if (value == (unsigned long long)-1 && PyErr_Occurred()) return false;
  *count = value;
  *dtype = code_of_type;
  return true;
}

// _redop(op): the reduction's Redop, from the module's table or its function.
bool RedopOf(PyObject* op, int* out) {
  PyObject* code = PyDict_GetItemWithError(hook.redop_codes, op);
  if (code != nullptr) {
    *out = int(PyLong_AsLong(code));
    return true;
  }
  PyErr_Clear();  // not there, or not hashable: the function knows
  PyObject* v = PyObject_CallOneArg(hook.redop_of, op);
  if (v == nullptr) return false;
  *out = int(PyLong_AsLong(v));
  Py_DECREF(v);
  return !(*out == -1 && PyErr_Occurred());
}

// A recorded call, from its begin to its end.
struct Begun {
  bool posting = false;
  bool any_source = false;
  uint64_t handle = 0;
  PyObject* group = nullptr;  // strong: a destroy_process_group meanwhile may drop the table's
};

// Records the call's begin. 1: recorded; 0: not (no member, or the library
// does not trace); -1: the bookkeeping failed (an exception is set).
int Begin(Call* c, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Begun* b) {
  b->posting = c->always_posting;
  if (!b->posting) {
    const int t = PyObject_IsTrue(Argument(c, kAsync, args, nargs, kwnames));
    if (t < 0) return -1;
    b->posting = t != 0;
  }
  b->group = GroupOf(Argument(c, kGroup, args, nargs, kwnames));
  if (b->group == nullptr) return -1;
  if (b->group == Py_None) return 0;
  long comm = PyLong_AsLong(PyTuple_GET_ITEM(b->group, 0));
  if (comm == -1 && PyErr_Occurred()) return -1;
  PyObject* index_of = PyTuple_GET_ITEM(b->group, 1);
  int peer = -1;
  long tag = 0;
  if (c->has_peer) {
    PyObject* group_peer =
        kwnames != nullptr && c->group_peer_key != nullptr ? Keyword(c->group_peer_key, args + nargs, kwnames)
                                                          : nullptr;
    if (group_peer != nullptr && group_peer != Py_None) {
      long p;
      if (!AsInt(group_peer, &p)) return -1;
      peer = int(p);
    } else {
      PyObject* global_peer = Argument(c, kPeer, args, nargs, kwnames);
      if (global_peer == Py_None) {
        peer = kAnyPeer;
        b->any_source = true;
      } else if (!GroupRank(index_of, global_peer, &peer)) {
        return -1;
      }
    }
  }
  if (c->p2p) {
    PyObject* t = Argument(c, kTag, args, nargs, kwnames);
    const int set = PyObject_IsTrue(t);  // int(tag or 0)
    if (set < 0 || (set && !AsInt(t, &tag))) return -1;
  }
  uint64_t count = 0;
  int dtype = 0, redop = 0;
  if (c->has_data && !NumelDtype(Argument(c, kData, args, nargs, kwnames), &count, &dtype)) return -1;
  if (c->has_op) {
    // By identity first: hashing torch's ReduceOp (pybind11) costs 150 ns,
    // and a program passes the same object (ReduceOp.SUM, or the default)
    // call after call. The held reference keeps the address its own.
    PyObject* op = Argument(c, kOp, args, nargs, kwnames);
    if (op == c->last_op) {
      redop = c->last_redop;
    } else {
      if (!RedopOf(op, &redop)) return -1;
      PyObject* old = c->last_op;  // as the dtype's pair: both set, then the old one let go
      Py_INCREF(op);
      c->last_op = op;
      c->last_redop = redop;
      Py_XDECREF(old);
    }
  }
  const int i = b->posting ? 1 : 0;
  if (c->call_ids[i] < 0) {
    PyObject* id = PyObject_CallFunction(hook.call_id, "OOI", c->names[i], c->op, c->flags[i]);
    if (id == nullptr) return -1;
    c->call_ids[i] = int(PyLong_AsLong(id));
    Py_DECREF(id);
    if (PyErr_Occurred()) return -1;
  }
  b->handle = b->posting ? hook.next_handle++ : 0;
  return hook.call_begin(c->call_ids[i], int(comm), peer, int(tag), count, dtype, redop, b->handle) < 0 ? 0 : 1;
}

// Says once that calls are not traced (the module's _warn), and goes on.
void WarnOnce() {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  PyObject* r = PyObject_CallFunctionObjArgs(hook.warn, hook.calls_are, value ? value : Py_None, nullptr);
  Py_XDECREF(r);
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
}

// The call returned `ret`: its end, or its post until its work ends.
void End(const Begun& b, PyObject* ret) {
  if (!b.posting) {
    int source = -1;  // recv from any source returns the sender's global rank
    if (b.any_source && PyLong_Check(ret) && !GroupRank(PyTuple_GET_ITEM(b.group, 1), ret, &source)) {
      PyErr_Clear();
      source = -1;
    }
    hook.call_end(0, source, -1);
  } else if (ret == Py_None) {
    hook.request_end(b.handle, -1, -1);
  } else {
    PyObject* entry = Py_BuildValue("(KOO)", (unsigned long long)b.handle, b.group,
                                    b.any_source ? Py_True : Py_False);
    PyObject* r = entry != nullptr ? PyObject_CallFunctionObjArgs(hook.post, ret, entry, nullptr) : nullptr;
    Py_XDECREF(entry);
    if (r == nullptr) {
      WarnOnce();
    } else {
      Py_DECREF(r);
    }
  }
}

PyObject* CallVectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Call* c = reinterpret_cast<Call*>(self);
  if (inside || hook.call_begin == nullptr) {
    return PyObject_Vectorcall(c->real, args, nargsf, kwnames);
  }
  Begun b;
  int recorded = Begin(c, args, PyVectorcall_NARGS(nargsf), kwnames, &b);
  PyObject *why_type = nullptr, *why = nullptr, *why_trace = nullptr;  // why it could not be recorded
  if (recorded < 0) {
    PyErr_Fetch(&why_type, &why, &why_trace);
    recorded = 0;
  }
  const uint64_t waits_before = waits_inside;
  inside = true;
  PyObject* ret = PyObject_Vectorcall(c->real, args, nargsf, kwnames);
  inside = false;
  if (why_type != nullptr) {
    if (ret != nullptr) {  // the call went on untraced: said once
      PyErr_Restore(why_type, why, why_trace);
      WarnOnce();
    } else {  // torch rejected the call too: its error is the one to see
      Py_XDECREF(why_type);
      Py_XDECREF(why);
      Py_XDECREF(why_trace);
    }
  }
  if (recorded) {
    if (ret == nullptr) {  // raised: the call ended, failed (an exception stays set: only C below)
      // Refused before torch issued it: a posted call raises only then; a
      // blocking one, when it waited on no work.
      const bool refused = b.posting || (c->waits_on_work && waits_inside == waits_before);
      if (b.posting) {
        if (refused && hook.request_not_issued) hook.request_not_issued(b.handle);
        else hook.request_end(b.handle, -1, -1);
      } else if (refused && hook.call_not_issued) {
        hook.call_not_issued();
      } else {
        hook.call_end(1, -1, -1);
      }
    } else {
      End(b, ret);
    }
  }
  Py_XDECREF(b.group);
  return ret;
}

PyObject* MethodVectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Method* m = reinterpret_cast<Method*>(self);
  waits_inside += inside;
  PyObject* to = PyDict_GET_SIZE(hook.posted) == 0 ? m->real : m->slow;
  return PyObject_Vectorcall(to, args, nargsf, kwnames);
}

// work.wait: bound like a Python function's method (the interpreter skips
// this where the type says METHOD_DESCRIPTOR and calls it with self first).
PyObject* MethodGet(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

// Pickled as what it replaces: by its module and name (functools.wraps set them).
PyObject* Reduce(PyObject* self, PyObject*) {
  return PyObject_GetAttrString(self, "__qualname__");
}

PyObject* CallRepr(PyObject* self) {
  return PyUnicode_FromFormat("<%R, traced by hangtrace>", reinterpret_cast<Call*>(self)->real);
}

PyObject* MethodRepr(PyObject* self) {
  return PyUnicode_FromFormat("<%R, traced by hangtrace>", reinterpret_cast<Method*>(self)->real);
}

int CallTraverse(PyObject* self, visitproc visit, void* arg) {
  Call* c = reinterpret_cast<Call*>(self);
  Py_VISIT(c->real);
  for (PyObject* f : c->fallback) Py_VISIT(f);
  Py_VISIT(c->last_op);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int CallClear(PyObject* self) {
  Call* c = reinterpret_cast<Call*>(self);
  Py_CLEAR(c->real);
  for (PyObject*& f : c->fallback) Py_CLEAR(f);
  Py_CLEAR(c->last_op);
  return 0;
}

void CallDealloc(PyObject* self) {
  Call* c = reinterpret_cast<Call*>(self);
  PyObject_GC_UnTrack(self);
  CallClear(self);
  for (PyObject*& n : c->names) Py_CLEAR(n);
  Py_CLEAR(c->op);
  for (PyObject*& k : c->key) Py_CLEAR(k);
  Py_CLEAR(c->group_peer_key);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

int MethodTraverse(PyObject* self, visitproc visit, void* arg) {
  Method* m = reinterpret_cast<Method*>(self);
  Py_VISIT(m->dict);
  Py_VISIT(m->real);
  Py_VISIT(m->slow);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int MethodClear(PyObject* self) {
  Method* m = reinterpret_cast<Method*>(self);
  Py_CLEAR(m->dict);
  Py_CLEAR(m->real);
  Py_CLEAR(m->slow);
  return 0;
}

void MethodDealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  MethodClear(self);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* call_type = nullptr;
PyObject* method_type = nullptr;

// Interned, for the pointer compare in Keyword (a non-str or None: nullptr).
PyObject* InternedOrNull(PyObject* name) {
  if (!PyUnicode_Check(name)) return nullptr;
  Py_INCREF(name);
  PyUnicode_InternInPlace(&name);
  return name;
}

const char kCallDoc[] =
    "call(real, blocking_name, posting_name, op, blocking_flags, posting_flags, always_posting, has_peer, p2p,\n"
    "     has_data, has_op, waits_on_work, positions, keywords, defaults, group_peer_key)\n"
    "A wrapper of the torch.distributed function `real` that records each call (hangtrace_torch._wrap).\n"
    "waits_on_work: blocking, it waits on a Work (a failure without a wait was a refusal before issuing).\n"
    "positions, keywords, defaults: 6-tuples for the group, async_op, root or peer, tag, data and\n"
    "reduction arguments (a position past the call's arguments: keyword or default; keyword None: none).";

PyObject* NewCall(PyObject*, PyObject* args) {
  PyObject *real, *blocking, *posting, *op, *positions, *keywords, *defaults, *group_peer_key;
  unsigned blocking_flags, posting_flags;
  int always_posting, has_peer, p2p, has_data, has_op, waits_on_work;
  if (!PyArg_ParseTuple(args, "OUUUIIppppppO!O!O!O:call", &real, &blocking, &posting, &op, &blocking_flags,
                        &posting_flags, &always_posting, &has_peer, &p2p, &has_data, &has_op, &waits_on_work,
                        &PyTuple_Type,
                        &positions, &PyTuple_Type, &keywords, &PyTuple_Type, &defaults, &group_peer_key)) {
    return nullptr;
  }
  if (PyTuple_GET_SIZE(positions) != kArgs || PyTuple_GET_SIZE(keywords) != kArgs ||
      PyTuple_GET_SIZE(defaults) != kArgs) {
    PyErr_SetString(PyExc_ValueError, "positions, keywords and defaults name 6 arguments each");
    return nullptr;
  }
  Call* c = PyObject_GC_New(Call, reinterpret_cast<PyTypeObject*>(call_type));
  if (c == nullptr) return nullptr;
  c->vectorcall = CallVectorcall;
  Py_INCREF(real);
  c->real = real;
  c->names[0] = InternedOrNull(blocking);
  c->names[1] = InternedOrNull(posting);
  Py_INCREF(op);
  c->op = op;
  c->call_ids[0] = c->call_ids[1] = -1;
  c->flags[0] = blocking_flags;
  c->flags[1] = posting_flags;
  c->always_posting = always_posting;
  c->has_peer = has_peer;
  c->p2p = p2p;
  c->has_data = has_data;
  c->has_op = has_op;
  c->waits_on_work = waits_on_work;
  for (int i = 0; i < kArgs; ++i) {
    const Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, i));
    c->at[i] = at < 0 ? PY_SSIZE_T_MAX : at;
    c->key[i] = InternedOrNull(PyTuple_GET_ITEM(keywords, i));
    c->fallback[i] = PyTuple_GET_ITEM(defaults, i);
    Py_INCREF(c->fallback[i]);
  }
  c->group_peer_key = InternedOrNull(group_peer_key);
  c->last_op = nullptr;
  c->last_redop = 0;
  PyObject_GC_Track(c);
  if (PyErr_Occurred()) {
    Py_DECREF(c);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(c);
}

const char kMethodDoc[] =
    "method(real, slow)\n"
    "A method of torch's Work: `real` while no call is posted, else `slow` (the hook's wrapper that ends it).";

PyObject* NewMethod(PyObject*, PyObject* args) {
  PyObject *real, *slow;
  if (!PyArg_ParseTuple(args, "OO:method", &real, &slow)) return nullptr;
  Method* m = PyObject_GC_New(Method, reinterpret_cast<PyTypeObject*>(method_type));
  if (m == nullptr) return nullptr;
  m->dict = nullptr;
  m->vectorcall = MethodVectorcall;
  Py_INCREF(real);
  m->real = real;
  Py_INCREF(slow);
  m->slow = slow;
  PyObject_GC_Track(m);
  return reinterpret_cast<PyObject*>(m);
}

const char kSetupDoc[] =
    "setup(groups, group_of, dtype_codes, redop_codes, redop_of, call_id, post, posted, warn, non_member)\n"
    "Arms the record path with the hook's tables and functions; raises where the preloaded library is not\n"
    "there.";

PyObject* Setup(PyObject*, PyObject* args) {
  PyObject *groups, *group_of, *dtype_codes, *redop_codes, *redop_of, *call_id, *post, *posted, *warn,
      *non_member;
  if (!PyArg_ParseTuple(args, "O!OO!O!OOOO!OO:setup", &PyDict_Type, &groups, &group_of, &PyDict_Type,
                        &dtype_codes, &PyDict_Type, &redop_codes, &redop_of, &call_id, &post, &PyDict_Type,
                        &posted, &warn, &non_member)) {
    return nullptr;
  }
  // The preloaded library is in the global scope, as ctypes.CDLL(None) finds it.
  auto begin = reinterpret_cast<CallBegin>(dlsym(RTLD_DEFAULT, "hangtrace_call_begin"));
  auto end = reinterpret_cast<CallEnd>(dlsym(RTLD_DEFAULT, "hangtrace_call_end"));
  auto request_end = reinterpret_cast<RequestEnd>(dlsym(RTLD_DEFAULT, "hangtrace_request_end"));
  if (begin == nullptr || end == nullptr || request_end == nullptr) {
    PyErr_SetString(PyExc_ImportError, "libhangtrace.so is not loaded (hangtrace_call_begin not found)");
    return nullptr;
  }
  PyObject* held[] = {groups, group_of, dtype_codes, redop_codes, redop_of, call_id,
                      post, posted, warn, non_member};
  for (PyObject* o : held) Py_INCREF(o);  // for the process's life
  hook.groups = groups;
  hook.group_of = group_of;
  hook.dtype_codes = dtype_codes;
  hook.redop_codes = redop_codes;
  hook.redop_of = redop_of;
  hook.call_id = call_id;
  hook.post = post;
  hook.posted = posted;
  hook.warn = warn;
  hook.non_member = non_member;
  hook.numel = PyUnicode_InternFromString("numel");
  hook.dtype = PyUnicode_InternFromString("dtype");
  hook.calls_are = PyUnicode_InternFromString("calls are");
  if (hook.numel == nullptr || hook.dtype == nullptr || hook.calls_are == nullptr) return nullptr;
  hook.call_begin = begin;
  hook.call_end = end;
  hook.request_end = request_end;
  hook.call_not_issued = reinterpret_cast<CallNotIssued>(dlsym(RTLD_DEFAULT, "hangtrace_call_not_issued"));
  hook.request_not_issued = reinterpret_cast<RequestNotIssued>(dlsym(RTLD_DEFAULT, "hangtrace_request_not_issued"));
  Py_RETURN_NONE;
}

PyObject* ForgetDefaultGroup(PyObject*, PyObject*) {
  Py_CLEAR(hook.default_group);
  Py_RETURN_NONE;
}

PyMethodDef kModuleMethods[] = {
    {"setup", Setup, METH_VARARGS, kSetupDoc},
    {"call", NewCall, METH_VARARGS, kCallDoc},
    {"method", NewMethod, METH_VARARGS, kMethodDoc},
    {"forget_default_group", ForgetDefaultGroup, METH_NOARGS,
     "The default group was destroyed: the next call without a group asks the hook again."},
    {nullptr, nullptr, 0, nullptr},
};

PyMethodDef kWrapperMethods[] = {
    {"__reduce__", Reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef kCallMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Call, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyMemberDef kMethodMembers[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(Method, dict), READONLY, nullptr},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Method, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef kWrapperGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot kCallSlots[] = {
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_members, kCallMembers},
    {Py_tp_repr, reinterpret_cast<void*>(CallRepr)},
    {Py_tp_traverse, reinterpret_cast<void*>(CallTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(CallClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(CallDealloc)},
    {Py_tp_doc, const_cast<char*>("A torch.distributed function whose calls hangtrace records.")},
    {0, nullptr},
};

PyType_Slot kMethodSlots[] = {
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(MethodGet)},
    {Py_tp_members, kMethodMembers},
    {Py_tp_getset, kWrapperGetSet},
    {Py_tp_methods, kWrapperMethods},
    {Py_tp_repr, reinterpret_cast<void*>(MethodRepr)},
    {Py_tp_traverse, reinterpret_cast<void*>(MethodTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(MethodClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(MethodDealloc)},
    {Py_tp_doc, const_cast<char*>("A method of torch's Work through which hangtrace ends posted calls.")},
    {0, nullptr},
};

PyType_Spec kCallSpec = {"_hangtrace_torch.Call", sizeof(Call), 0,
                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, kCallSlots};
PyType_Spec kMethodSpec = {
    "_hangtrace_torch.Method", sizeof(Method), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    kMethodSlots};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_hangtrace_torch",
                       "The record path of hangtrace's torch.distributed hook (python/hangtrace_torch.py).", -1,
                       kModuleMethods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__hangtrace_torch() {
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  call_type = PyType_FromSpec(&kCallSpec);
  method_type = PyType_FromSpec(&kMethodSpec);
  if (call_type == nullptr || method_type == nullptr) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
