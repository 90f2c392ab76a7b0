// Where the out-of-process frame reader (python_frames.cc) finds things in
// a CPython's memory: one entry per minor version, each taken from that
// version's own headers by dump/python_offsets_probe.c (see
// scripts/gen_python_offsets.sh, which writes python_offsets.gen.cc). A
// field a version does not have is kNone.
#pragma once

#include <cstdint>

namespace hangtrace::python {

inline constexpr uint32_t kNone = 0xffffffffu;

struct PyLayout {
  uint32_t version;  // 0xMMmm: major, minor
  // _PyRuntimeState, PyInterpreterState
  uint32_t runtime_interpreters_head, interp_next, interp_threads_head;
  // PyThreadState
  uint32_t tstate_next, tstate_thread_id, tstate_native_thread_id;
  // The thread's innermost frame: `tstate_frame` points at it, or (3.11,
  // 3.12) at a _PyCFrame whose `cframe_current_frame` does.
  uint32_t tstate_frame, cframe_current_frame;
  // The frame (PyFrameObject before 3.11, _PyInterpreterFrame after):
  // its caller, its code object, and where it is: an instruction pointer
  // (3.11+) or an instruction index (f_lasti, 3.10).
  uint32_t frame_previous, frame_code, frame_instr, frame_lasti, frame_owner, frame_is_entry;
  // PyCodeObject
  uint32_t code_filename, code_name, code_firstlineno, code_linetable, code_adaptive;
  // PyObject, PyTypeObject, PyBytesObject
  uint32_t ob_type, tp_name, bytes_size, bytes_sval;
  // PyASCIIObject / PyCompactUnicodeObject and the bits of its state word
  uint32_t str_length, str_state, ascii_size, compact_size;
  uint32_t state_kind_shift, state_compact_bit, state_ascii_bit;
};

// The layouts of python_offsets.gen.cc, oldest first.
extern const PyLayout kLayouts[];
extern const int kNumLayouts;

}  // namespace hangtrace::python
