// libarchive, loaded when the first archive is read or written, not when a
// program starts (docs/decisions/0050-libarchive-loaded-on-first-use.md):
// stoker-run starts for every replica and unpacks only a Python package's
// sdist, and libarchive brings ten more libraries (libxml2, ICU, the
// compressors) whose relocations cost every start about a millisecond.
//
// The functions storage/archive.cc calls, as members with their own names
// and types (the declarations of <archive.h> and <archive_entry.h>).
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "common/status.h"

namespace stoker::storage {

#define STOKER_LIBARCHIVE_FUNCTIONS(X)       \
  X(archive_entry_filetype)                  \
  X(archive_entry_free)                      \
  X(archive_entry_hardlink)                  \
  X(archive_entry_new)                       \
  X(archive_entry_pathname)                  \
  X(archive_entry_pathname_utf8)             \
  X(archive_entry_perm)                      \
  X(archive_entry_set_filetype)              \
  X(archive_entry_set_gid)                   \
  X(archive_entry_set_hardlink)              \
  X(archive_entry_set_mtime)                 \
  X(archive_entry_set_pathname)              \
  X(archive_entry_set_perm)                  \
  X(archive_entry_set_size)                  \
  X(archive_entry_set_uid)                   \
  X(archive_entry_size)                      \
  X(archive_entry_symlink)                   \
  X(archive_error_string)                    \
  X(archive_filter_code)                     \
  X(archive_filter_count)                    \
  X(archive_read_data)                       \
  X(archive_read_data_block)                 \
  X(archive_read_free)                       \
  X(archive_read_new)                        \
  X(archive_read_next_header)                \
  X(archive_read_open_fd)                    \
  X(archive_read_open_filename)              \
  X(archive_read_open_memory)                \
  X(archive_read_support_filter_gzip)        \
  X(archive_read_support_format_tar)         \
  X(archive_write_add_filter_gzip)           \
  X(archive_write_close)                     \
  X(archive_write_data)                      \
  X(archive_write_data_block)                \
  X(archive_write_disk_new)                  \
  X(archive_write_disk_set_options)          \
  X(archive_write_finish_entry)              \
  X(archive_write_free)                      \
  X(archive_write_header)                    \
  X(archive_write_new)                       \
  X(archive_write_open)                      \
  X(archive_write_set_bytes_in_last_block)   \
  X(archive_write_set_format_pax_restricted) \
  X(archive_write_set_options)

struct LibArchive {
#define STOKER_LIBARCHIVE_MEMBER(name) decltype(&::name) name = nullptr;
  STOKER_LIBARCHIVE_FUNCTIONS(STOKER_LIBARCHIVE_MEMBER)
#undef STOKER_LIBARCHIVE_MEMBER
};

// The soname loaded (the one Debian's libarchive13 installs).
inline constexpr char kLibArchiveSoname[] = "libarchive.so.13";

// Loads libarchive once (thread-safe) and returns its functions;
// FailedPrecondition naming the library and the package to install when it
// cannot be loaded or lacks a function. Later calls return the same result.
Result<const LibArchive*> LoadLibArchive();

}  // namespace stoker::storage
