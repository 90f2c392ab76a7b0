#include "tracer/report_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "tracer/config.h"

namespace hangtrace::report_folder {
namespace {

std::string ModeText(mode_t mode) {
  char text[8];
  snprintf(text, sizeof(text), "%03o", unsigned(mode & 0777));
  return text;
}

// What an opened folder must be: a folder of this user that no one else
// may write in, unless it is sticky (then they cannot touch what is ours).
bool Trusted(int fd, const std::string& shown, std::string* why) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    *why = shown + " is not a folder";
  } else if (st.st_uid != geteuid()) {
    *why = shown + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user: refused";
  } else if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
    *why = shown + " has mode " + ModeText(st.st_mode) +
           ": other users may write in it, and rename or replace what hangtrace writes there; refused (chmod 700 "
           "it, make it sticky with chmod +t, or name another with HANGTRACE_REPORT_DIR)";
  } else {
    return true;
  }
  return false;
}

}  // namespace

std::string DefaultPath(const std::string& job) {
  std::string dir = ExpandUser(Config::FromEnvironment().report_dir);
  if (!dir.empty()) return dir;
  const char* base = getenv("SLURM_SUBMIT_DIR");
  if (!base || !*base) base = getenv("PWD");
  std::string where = base && *base ? base : ".";
  return where + "/hangtrace-report-" + job;
}

std::string FallbackPath(const std::string& job) {
  const char* home = getenv("HOME");
  if (!home || !*home) return "";
  return std::string(home) + "/.hangtrace/hangtrace-report-" + job;
}

namespace {
// Opens `path` one component at a time from / (or the current folder), so
// that a link another user made on the way (in a sticky /tmp, a project
// folder) is never followed: a link is followed only when it is root's or
// this user's (Linux's protected_symlinks rule, whatever the sysctl says).
// Missing components are made (0700) when `create_from` is below them:
// from that index on (the report folder itself, or the fallback's
// ~/.hangtrace too). Returns a descriptor of the last component, or -1 with
// `why` and errno.
int WalkOpen(const std::string& path, size_t create_from, std::string* why) {
  std::vector<std::string> parts;
  for (size_t at = 0; at < path.size();) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    if (slash > at) parts.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  int dir = open(path[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  std::string shown = path[0] == '/' ? "" : ".";
  for (size_t i = 0; dir >= 0 && i < parts.size(); ++i) {
    const std::string& part = parts[i];
    shown += "/" + part;
    struct stat st;
    if (fstatat(dir, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      const int missing = errno;
      if (missing != ENOENT || i < create_from || (mkdirat(dir, part.c_str(), 0700) != 0 && errno != EEXIST)) {
        const int saved = missing == ENOENT && i >= create_from ? errno : missing;
        *why = (i + 1 == parts.size() ? "cannot make " : "cannot reach ") + shown + ": " + strerror(saved);
        close(dir);
        errno = saved;
        return -1;
      }
    } else if (S_ISLNK(st.st_mode) && st.st_uid != 0 && st.st_uid != geteuid()) {
      *why = shown + " is a link another user (uid " + std::to_string(st.st_uid) + ") made: not followed";
      close(dir);
      errno = EPERM;
      return -1;
    }
    const bool last = i + 1 == parts.size();
    const int next = openat(dir, part.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (last ? O_NOFOLLOW : 0));
    const int saved = errno;
    close(dir);
    if (next < 0) {
      *why = shown + (saved == ELOOP || saved == ENOTDIR ? " is not a folder of its own (a link, or a file): refused"
                                                         : std::string(": ") + strerror(saved));
      errno = saved;
      return -1;
    }
    dir = next;
  }
  return dir;
}
}  // namespace

int Open(const std::string& path, bool create, std::string* why, bool* cannot_create, bool create_parents) {
  if (cannot_create) *cannot_create = false;
  if (path.empty()) {
    *why = "no report folder named";
    return -1;
  }
  // Only the report folder itself is made (and, for a folder of the
  // user's own such as the fallback, its parents): a launch folder that is
  // gone is not made again.
  size_t components = 0;
  for (size_t at = 0; at < path.size(); ++at) components += path[at] != '/' && (at == 0 || path[at - 1] == '/');
  const size_t create_from = !create ? SIZE_MAX : create_parents ? 0 : components - 1;
  const int fd = WalkOpen(path, create_from, why);
  if (fd < 0) {
    if (cannot_create) *cannot_create = errno == EACCES || errno == EPERM || errno == EROFS;
    return -1;
  }
  if (!Trusted(fd, path, why) || !HasRoom(fd, why)) {
    if (why->rfind(path, 0) != 0) *why = path + ": " + *why;
    close(fd);
    return -1;
  }
  return fd;
}

int OpenSub(int dir, const std::string& name, bool create, std::string* why, const std::string& shown_parent) {
  const std::string shown = shown_parent.empty() ? name : shown_parent + "/" + name;
  if (create && mkdirat(dir, name.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = "cannot make " + shown + ": " + strerror(errno);
    return -1;
  }
  struct stat link;
  const bool known = fstatat(dir, name.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0;
  const int fd = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *why = shown + (errno == ELOOP || errno == ENOTDIR ? " is not a folder of its own (a link, or a file)" +
                                                             (known && link.st_uid != geteuid()
                                                                  ? " that uid " + std::to_string(link.st_uid) + " made"
                                                                  : std::string()) +
                                                             ": refused"
                                                       : std::string(": ") + strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
    *why = shown + (st.st_uid != geteuid() ? " belongs to uid " + std::to_string(st.st_uid) + ", not to this user"
                                           : " is a folder others may write in") +
           ": refused";
    close(fd);
    return -1;
  }
  return fd;
}

int Create(int dir, const std::string& name) {
  return openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

bool WriteWhole(int dir, const std::string& name, const std::string& text) {
  char aside[96];
  snprintf(aside, sizeof(aside), ".%s.%d.%ld", name.c_str(), int(getpid()), long(time(nullptr)));
  const int fd = Create(dir, aside);
  if (fd < 0) return false;
  bool ok = true;
  for (size_t at = 0; ok && at < text.size();) {
    const ssize_t n = write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      ok = false;
    } else {
      at += size_t(n);
    }
  }
  const int saved = errno;
  if (close(fd) != 0 && ok) ok = false;
  // rename replaces a name, never follows it: a link planted there is gone.
  if (ok && renameat(dir, aside, dir, name.c_str()) == 0) return true;
  unlinkat(dir, aside, 0);
  errno = ok ? errno : saved;
  return false;
}

bool Read(int dir, const std::string& name, std::string* out, size_t max) {
  out->clear();
  const int fd = openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
  char buf[4096];
  while (ok && out->size() < max) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, size_t(n));
  }
  close(fd);
  if (out->size() > max) out->resize(max);
  return ok;
}

long long ModifiedAt(int dir, const std::string& name) {
  struct stat st;
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    return -1;
  }
  return (long long)st.st_mtime;
}

bool HasRoom(int dir, std::string* why, unsigned long long need) {
  struct statvfs vfs;
  if (fstatvfs(dir, &vfs) != 0) return true;  // not known: the writes will say
  if (vfs.f_flag & ST_RDONLY) {
    *why = "its file system is read-only";
    return false;
  }
  const unsigned long long free_bytes = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
  if (free_bytes < need) {
    *why = "its file system is full (" + std::to_string(free_bytes / 1024) + " KiB free)";
    return false;
  }
  return true;
}

}  // namespace hangtrace::report_folder
