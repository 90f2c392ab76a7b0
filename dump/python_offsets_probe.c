/* Prints, for the CPython whose headers it is compiled against, the offsets
 * that hangtrace's out-of-process frame reader (dump/python_frames.cc)
 * follows, as one initializer of struct PyLayout (dump/python_layout.h).
 * scripts/gen_python_offsets.sh compiles it against each CPython installed
 * and writes dump/python_offsets.gen.cc; a test compares that file with the
 * headers again. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#if PY_VERSION_HEX >= 0x030b0000
#include <internal/pycore_frame.h>
#else
#include <frameobject.h>
#endif
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>

#define NONE 0xffffffffu  /* printed as kNone */

/* An offset, or kNone where this version has no such field. */
static const char* opt(unsigned v) {
  static char buf[8][16];
  static int next = 0;
  char* b = buf[next++ % 8];
  if (v == NONE) return "kNone";
  snprintf(b, 16, "%u", v);
  return b;
}

/* The bit position of the first set bit of a bitfield set to all ones. */
static unsigned shift_of(unsigned mask) {
  unsigned s = 0;
  while (mask && !(mask & 1u)) {
    mask >>= 1;
    ++s;
  }
  return s;
}

int main(void) {
  PyASCIIObject a;
  unsigned state, kind_mask, compact_mask, ascii_mask;
  memset(&a, 0, sizeof(a));
  a.state.kind = 7;
  memcpy(&kind_mask, &a.state, sizeof(unsigned));
  memset(&a, 0, sizeof(a));
  a.state.compact = 1;
  memcpy(&compact_mask, &a.state, sizeof(unsigned));
  memset(&a, 0, sizeof(a));
  a.state.ascii = 1;
  memcpy(&ascii_mask, &a.state, sizeof(unsigned));
  (void)state;

  printf("    {0x%02x%02x,  // %s\n", PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_VERSION);
  printf("     %zu, %zu, %zu,  // runtime: interpreters.head; interp: next, threads head\n",
         offsetof(_PyRuntimeState, interpreters.head), offsetof(PyInterpreterState, next),
#if PY_VERSION_HEX >= 0x030b0000
         offsetof(PyInterpreterState, threads.head)
#else
         offsetof(PyInterpreterState, tstate_head)
#endif
  );
  printf("     %zu, %zu, %s,  // thread state: next, thread_id, native_thread_id\n",
         offsetof(PyThreadState, next), offsetof(PyThreadState, thread_id),
#if PY_VERSION_HEX >= 0x030b0000
         opt((unsigned)offsetof(PyThreadState, native_thread_id))
#else
         opt(NONE)
#endif
  );
#if PY_VERSION_HEX >= 0x030d0000
  printf("     %zu, %s,  // thread state: current frame (3.13: itself), cframe.current_frame\n",
         offsetof(PyThreadState, current_frame), opt(NONE));
#elif PY_VERSION_HEX >= 0x030b0000
  printf("     %zu, %s,  // thread state: cframe, cframe.current_frame\n", offsetof(PyThreadState, cframe),
         opt((unsigned)offsetof(_PyCFrame, current_frame)));
#else
  printf("     %zu, %s,  // thread state: frame (a PyFrameObject)\n", offsetof(PyThreadState, frame), opt(NONE));
#endif
#if PY_VERSION_HEX >= 0x030d0000
  printf("     %zu, %zu, %zu, %s, %zu, %s,  // frame: previous, code, instruction pointer, lasti, owner, is_entry\n",
         offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, f_executable),
         offsetof(_PyInterpreterFrame, instr_ptr), opt(NONE), offsetof(_PyInterpreterFrame, owner), opt(NONE));
#elif PY_VERSION_HEX >= 0x030c0000
  printf("     %zu, %zu, %zu, %s, %zu, %s,  // frame: previous, code, prev_instr, lasti, owner, is_entry\n",
         offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, f_code),
         offsetof(_PyInterpreterFrame, prev_instr), opt(NONE), offsetof(_PyInterpreterFrame, owner), opt(NONE));
#elif PY_VERSION_HEX >= 0x030b0000
  printf("     %zu, %zu, %zu, %s, %zu, %zu,  // frame: previous, code, prev_instr, lasti, owner, is_entry\n",
         offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, f_code),
         offsetof(_PyInterpreterFrame, prev_instr), opt(NONE), offsetof(_PyInterpreterFrame, owner),
         offsetof(_PyInterpreterFrame, is_entry));
#else
  printf("     %zu, %zu, %s, %zu, %s, %s,  // frame: f_back, f_code, instruction pointer, f_lasti, owner, is_entry\n",
         offsetof(PyFrameObject, f_back), offsetof(PyFrameObject, f_code), opt(NONE), offsetof(PyFrameObject, f_lasti),
         opt(NONE), opt(NONE));
#endif
  printf("     %zu, %zu, %zu, %zu, %s,  // code: filename, name, firstlineno, linetable, code_adaptive\n",
         offsetof(PyCodeObject, co_filename), offsetof(PyCodeObject, co_name),
         offsetof(PyCodeObject, co_firstlineno), offsetof(PyCodeObject, co_linetable),
#if PY_VERSION_HEX >= 0x030b0000
         opt((unsigned)offsetof(PyCodeObject, co_code_adaptive))
#else
         opt(NONE)
#endif
  );
  printf("     %zu, %zu, %zu, %zu,  // ob_type, tp_name, bytes: ob_size, ob_sval\n", offsetof(PyObject, ob_type),
         offsetof(PyTypeObject, tp_name), offsetof(PyVarObject, ob_size), offsetof(PyBytesObject, ob_sval));
  printf("     %zu, %zu, %zu, %zu,  // str: length, state, sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject)\n",
         offsetof(PyASCIIObject, length), offsetof(PyASCIIObject, state), sizeof(PyASCIIObject),
         sizeof(PyCompactUnicodeObject));
  printf("     %u, %u, %u},  // str state: kind shift, compact bit, ascii bit\n", shift_of(kind_mask),
         shift_of(compact_mask), shift_of(ascii_mask));
  return 0;
}
