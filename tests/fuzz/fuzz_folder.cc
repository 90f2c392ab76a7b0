// libFuzzer target: any bytes as a folder handed to `hangtrace analyze`.
// The input is a little script that builds a folder (trace files of any
// content, node.json files, subfolders, links that loop or point anywhere,
// fifos, unreadable files); then the whole analysis runs on it: the folder
// walk, every file's reader, node.json, the diagnosis and the report. None
// may crash, hang or throw (scripts/fuzz.sh builds it with clang and
// AddressSanitizer; tests replay tests/fuzz/folder_corpus).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "merger/diagnose.h"
#include "merger/model.h"
#include "merger/report.h"

namespace {

const char* const kNames[] = {"a.htrace", "b.htrace", "node.json", "sub", "sub/c.htrace", "sub/node.json",
                              "sub/deeper", "sub/deeper/d.htrace", "loop.htrace", "x"};
constexpr size_t kNumNames = sizeof(kNames) / sizeof(kNames[0]);

struct Reader {
  const uint8_t* p;
  size_t left;
  uint8_t Byte() {
    if (!left) return 0;
    --left;
    return *p++;
  }
  std::string Bytes(size_t n) {
    n = std::min(n, left);
    std::string s(reinterpret_cast<const char*>(p), n);
    p += n;
    left -= n;
    return s;
  }
};

void Build(const std::string& root, Reader& in) {
  while (in.left) {
    const uint8_t op = in.Byte() % 8;
    const std::string name = kNames[in.Byte() % kNumNames];
    const std::string path = root + "/" + name;
    const std::string target = root + "/" + kNames[in.Byte() % kNumNames];
    switch (op) {
      case 0:
      case 1: {  // a file with the next bytes (length: two bytes, little-endian)
        size_t n = in.Byte();
        n |= size_t(in.Byte()) << 8;
        std::string content = in.Bytes(n);
        // Never through a link, never into a fifo made earlier.
        int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        if (fd >= 0) {
          struct stat st;
          if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) (void)!write(fd, content.data(), content.size());
          close(fd);
        }
        break;
      }
      case 2: mkdir(path.c_str(), 0700); break;  // (fails harmlessly under a file or a link)
      case 3: (void)!symlink(target.c_str(), path.c_str()); break;      // maybe a loop, maybe dangling
      case 4: (void)!symlink(path.c_str(), path.c_str()); break;        // a link to itself
      case 5: mkfifo(path.c_str(), 0600); break;
      case 6: (void)!symlink("/dev/zero", path.c_str()); break;
      case 7: {  // unreadable (never through a link: it may lead out of the folder)
        struct stat st;
        const mode_t mode = in.Byte() & 1 ? 0 : 0700;
        if (lstat(path.c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) chmod(path.c_str(), mode);
        break;
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char tmpl[] = "/tmp/hangtrace-fuzz-folder-XXXXXX";
  if (!mkdtemp(tmpl)) return 0;
  const std::string root = tmpl;
  Reader in{data, size};
  Build(root, in);
  hangtrace::LoadOptions options;
  options.threads = 1;
  hangtrace::Job job = hangtrace::LoadJob({root}, options);
  if (job.world_size > 0) {
    hangtrace::Diagnosis d = hangtrace::Diagnose(job);
    (void)hangtrace::TextReport(job, d);
    (void)hangtrace::JsonText(hangtrace::JsonReport(job, d));
  }
  // FUZZ_KEEP=1 keeps the folder, to rerun `hangtrace analyze` on a finding.
  if (getenv("FUZZ_KEEP")) {
    fprintf(stderr, "fuzz_folder: kept %s\n", root.c_str());
    return 0;
  }
  // Make everything removable again: folders only, never through a link.
  std::error_code ec;
  for (const char* name : kNames) {
    struct stat st;
    const std::string path = root + "/" + name;
    if (lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) chmod(path.c_str(), 0700);
  }
  std::filesystem::remove_all(root, ec);
  return 0;
}
