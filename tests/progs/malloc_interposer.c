/* A malloc interposer of the common kind (tests: it must work beside
 * libhangtrace.so, preloaded before or after it, traced or not). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
/* It resolves the real functions
 * with dlsym(RTLD_NEXT) from inside malloc itself. */
static void* (*real_malloc)(size_t);
static void (*real_free)(void*);
static void* (*real_calloc)(size_t, size_t);
static void* (*real_realloc)(void*, size_t);
static char bootstrap[4096];
static size_t used;
static int resolving;
static void resolve(void) {
  if (real_malloc || resolving) return;
  resolving = 1;
  real_malloc = dlsym(RTLD_NEXT, "malloc");
  real_free = dlsym(RTLD_NEXT, "free");
  real_calloc = dlsym(RTLD_NEXT, "calloc");
  real_realloc = dlsym(RTLD_NEXT, "realloc");
  resolving = 0;
}
void* malloc(size_t n) {
  resolve();
  if (!real_malloc) { void* p = bootstrap + used; used += (n + 15) & ~15ul; return p; }
  return real_malloc(n);
}
void free(void* p) {
  if ((char*)p >= bootstrap && (char*)p < bootstrap + sizeof(bootstrap)) return;
  resolve();
  if (real_free) real_free(p);
}
void* calloc(size_t a, size_t b) {
  resolve();
  if (!real_calloc) { void* p = bootstrap + used; used += (a * b + 15) & ~15ul; return p; }
  return real_calloc(a, b);
}
void* realloc(void* p, size_t n) { resolve(); return real_realloc(p, n); }
