#include "admin/log_export.h"

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "projections/fold.h"
#include "projections/read_model.h"

namespace gw::admin {

namespace {

// The error of a write of `what` that failed with `error`, the errno it left (0: none known).
Error write_failed(const char* what, int error) {
  if (error == EPIPE) return make_error(Code::kUnavailable, std::string(kReaderGone));
  return make_error(Code::kUnavailable,
                    std::string("cannot write ") + what +
                        (error != 0 ? std::string(": ") + std::strerror(error) : std::string()));
}

// kValidationFailed if `seq`, given as `flag`, is past the log's last event; an error reading it.
std::optional<Error> past_the_end(const Store& store, std::string_view flag, uint64_t seq) {
  auto last = ReadModel(store).last_seq();
  if (!last.ok()) return std::move(last.error());
  if (seq <= last.value()) return std::nullopt;
  return make_error(Code::kValidationFailed, std::string(flag) + " " + std::to_string(seq) +
                                                 " is past the end of the log (" +
                                                 the_logs_end(last.value()) + ")");
}

}  // namespace

Result<uint64_t> write_events(const Store& store, uint64_t after, std::ostream& out) {
  // An `after` past the log's end is a checkpoint from another log, or from this one before an
  // older backup was restored: writing nothing, the command had the auditor skip every event up to
  // it without a word. Refused, as GET /v1/events refuses it, and replay its --until-seq.
  if (auto past = past_the_end(store, "--after", after)) return std::move(*past);
  auto it = store.iterate(Cf::kEvents);
  uint64_t written = 0;
  int error = 0;  // taken as a write fails, before the store's reads can change errno
  for (it->Seek(encode_u64(after + 1)); it->Valid() && out; it->Next()) {
    errno = 0;
    out.write(it->value().data(), static_cast<std::streamsize>(it->value().size()));
    out.put('\n');
    if (!out) error = errno;
    ++written;
  }
  if (!it->status().ok()) return io_error(it->status());
  if (out) {
    errno = 0;
    out.flush();
    if (!out) error = errno;
  }
  if (!out) return write_failed("the events", error);
  return written;
}

Result<uint64_t> write_replay(const Store& store, uint64_t until_seq, std::ostream& out,
                              const FoldOptions& options) {
  if (auto past = past_the_end(store, "--until-seq", until_seq)) return std::move(*past);
  auto fold = Fold::of_log(store, until_seq, options);
  if (!fold.ok()) return std::move(fold.error());
  // errno is taken right after a write that failed: a fold on disk reads between the writes.
  errno = 0;
  out << "{\"until_seq\":" << until_seq << ",\"records\":[";
  if (!out) return write_failed("the records", errno);
  uint64_t records = 0;
  auto listed = fold.value()->for_each_record([&](const Record& record) -> Result<bool> {
    if (meta_of(record).deleted_at != 0) return true;
    errno = 0;
    out << (records++ == 0 ? "\n" : ",\n") << to_json(record);
    if (!out) return write_failed("the records", errno);
    return true;
  });
  if (!listed.ok()) return std::move(listed.error());
  errno = 0;
  out << "\n]}\n";
  out.flush();
  if (!out) return write_failed("the records", errno);
  return records;
}

}  // namespace gw::admin
