// The automatic report's folder, which every node of a job writes into
// (docs/DUMP.md, "The automatic report"; what is refused and why:
// docs/SECURITY.md, "The report folder"). Shared by the runtime, which
// decides whether a round can start and looks for one another node
// announced, and by `hangtrace auto-report`, which writes the round.
//
// The folder is opened once and checked; every file in it is made and
// opened relative to that descriptor, never through a path checked first
// and opened after: new files with O_EXCL, every open with O_NOFOLLOW,
// reads with O_NONBLOCK (a FIFO planted under a file's name never blocks),
// and what was opened is checked with fstat (a regular file, or a folder,
// of this user). A folder other users may write in is refused unless it is
// sticky, so that they cannot rename or remove what is ours in it; the
// round folders and files in it must then be ours, as everywhere.
#pragma once

#include <string>

namespace hangtrace::report_folder {

// Where the report goes by default: HANGTRACE_REPORT_DIR (`$USER`
// expanded), else hangtrace-report-JOB in the folder the job was
// submitted from (SLURM_SUBMIT_DIR) or launched from (PWD).
std::string DefaultPath(const std::string& job);

// The user's own place, used when the default's folder cannot take it (a
// launch folder the user cannot write): $HOME/.hangtrace/hangtrace-report-JOB
// (a home is usually on every node); "" without a home.
std::string FallbackPath(const std::string& job);

// Opens the report folder `path`, making it (0700) when `create` and it is
// missing (its missing parents too with `create_parents`: a folder of the
// user's own, as the fallback), and checks it: reached without following a
// link another user made on the way, a folder (not a link), this user's,
// writable by no one else unless sticky, on a file system that is writable
// and has room. Returns its descriptor, or -1 with `why` (one sentence) and
// `*cannot_create` set when it could not be made for lack of permission
// (the caller may fall back).
int Open(const std::string& path, bool create, std::string* why, bool* cannot_create = nullptr,
         bool create_parents = false);

// A sub-folder of an opened folder (a run's, a round's, a look's): made
// 0700 when `create`, opened without following a link, and ours; `why`
// names it under `shown_parent`.
int OpenSub(int dir, const std::string& name, bool create, std::string* why, const std::string& shown_parent = "");

// A new file in `dir` (O_EXCL, O_NOFOLLOW, 0600): -1 when the name is
// taken (EEXIST) or the file cannot be made.
int Create(int dir, const std::string& name);

// Writes `text` into the new file `name` of `dir` whole, or not at all: it
// goes to a unique name first (O_EXCL) and is renamed into place. False
// with errno on failure (nothing left behind).
bool WriteWhole(int dir, const std::string& name, const std::string& text);

// Reads a small regular file of this user (`max` bytes at most) without
// following links or blocking on a FIFO: false when it is anything else.
bool Read(int dir, const std::string& name, std::string* out, size_t max = 64 * 1024);

// The modification time of `name` in `dir` (seconds since the epoch) when
// it is a regular file of this user; -1 otherwise.
long long ModifiedAt(int dir, const std::string& name);

// Whether the file system of `dir` can take a report: writable, and
// `need` bytes free at least; else false with `why`.
bool HasRoom(int dir, std::string* why, unsigned long long need = 4ull << 20);

}  // namespace hangtrace::report_folder
