// The dlsym that libhangtrace.so exports (dlsym.cc), and glibc's own.
#pragma once

namespace hangtrace {

// glibc's dlsym, found with dlvsym (never our wrapper). Asked from inside
// libhangtrace.so, RTLD_NEXT means the objects after it.
void* RealDlsym(void* handle, const char* name);

}  // namespace hangtrace
