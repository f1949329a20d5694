#include "store/wal_tail.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "store/crc32c.h"

namespace gw {
namespace {

// RocksDB's log format (db/log_format.h of RocksDB 7.8): records never cross a 32 KiB block;
// a block's last 1 to 6 bytes, too few for a header, are zeros.
constexpr size_t kBlockSize = 32768;
constexpr size_t kHeaderSize = 7;  // masked CRC-32C (4, little-endian), length (2), type (1)
enum RecordType : uint8_t { kZero = 0, kFull = 1, kFirst = 2, kMiddle = 3, kLast = 4 };
// A batch starts with its sequence number (8 bytes) and count of entries (4), little-endian.
constexpr size_t kBatchHeader = 12;
constexpr uint32_t kMaskDelta = 0xa282ead8u;

uint32_t fixed32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint64_t fixed64(const unsigned char* p) {
  return uint64_t{fixed32(p)} | uint64_t{fixed32(p + 4)} << 32;
}

// A log file's bytes, mapped read-only.
class Mapped {
 public:
  static std::optional<Mapped> open(const std::string& path, std::string* error) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *error = "cannot open " + path + ": " + std::strerror(errno);
      return std::nullopt;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      *error = "cannot read " + path + ": " + std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    Mapped m;
    m.size_ = static_cast<size_t>(st.st_size);
    if (m.size_ > 0) {
      void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        *error = "cannot read " + path + ": " + std::strerror(errno);
        ::close(fd);
        return std::nullopt;
      }
      m.data_ = static_cast<const unsigned char*>(p);
    }
    ::close(fd);
    return m;
  }
  Mapped(Mapped&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Mapped& operator=(Mapped&&) = delete;
  ~Mapped() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  Mapped() = default;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

// The length of the record whose header starts at `pos`, if that header is of one of `types`
// and its length fits its block and the file (its checksum not checked); nullopt otherwise.
std::optional<size_t> header_at(const Mapped& log, size_t pos,
                                std::initializer_list<uint8_t> types) {
  const size_t left = kBlockSize - pos % kBlockSize;
  if (left < kHeaderSize || log.size() - pos < kHeaderSize) return std::nullopt;
  const unsigned char* h = log.data() + pos;
  const uint8_t type = h[6];
  if (std::find(types.begin(), types.end(), type) == types.end()) return std::nullopt;
  const size_t length = size_t{h[4]} | size_t{h[5]} << 8;
  // RocksDB starts a batch with an empty first fragment where a block has just a header's room.
  if ((length == 0 && type != kFirst) || kHeaderSize + length > left ||
      log.size() - pos - kHeaderSize < length) {
    return std::nullopt;
  }
  return length;
}

// Whether a record with a valid header and checksum starts at `pos`, of one of `types`.
bool record_at(const Mapped& log, size_t pos, std::initializer_list<uint8_t> types) {
  const std::optional<size_t> length = header_at(log, pos, types);
  if (!length) return false;
  const unsigned char* h = log.data() + pos;
  const uint8_t type = h[6];
  if (type == kFull && *length < kBatchHeader) return false;
  return fixed32(h) ==
         wal_record_crc(type, reinterpret_cast<const char*>(h + kHeaderSize), *length);
}

// Whether `log` holds nothing but zeros from `from` to its end.
bool zeros_from(const Mapped& log, size_t from) {
  return std::all_of(log.data() + from, log.data() + log.size(),
                     [](unsigned char c) { return c == 0; });
}

// One log read from its start as RocksDB's reader reads it, up to the first thing it would not
// take as a record.
struct Walk {
  bool irregular = false;  // something other than records, block trailers and a zero tail
  size_t torn_start = 0;   // irregular: where the batch it breaks starts
  std::string what;        // irregular: what was found
  bool any_complete = false;
  uint64_t last_complete_seq = 0;
};

Walk walk(const Mapped& log) {
  Walk w;
  const unsigned char* d = log.data();
  const size_t n = log.size();
  size_t pos = 0;
  bool in_batch = false;  // inside a batch split into fragments
  size_t batch_start = 0;
  std::string head;  // a fragmented batch's first bytes (its header), up to kBatchHeader
  auto complete = [&](std::string_view batch_head) {
    if (batch_head.size() < kBatchHeader) return;
    const auto* p = reinterpret_cast<const unsigned char*>(batch_head.data());
    const uint64_t seq = fixed64(p);
    const uint32_t count = fixed32(p + 8);
    w.any_complete = true;
    w.last_complete_seq = count > 0 ? seq + count - 1 : (seq > 0 ? seq - 1 : 0);
  };
  auto stop = [&](std::string what) {
    w.irregular = true;
    w.torn_start = in_batch ? batch_start : pos;
    w.what = std::move(what);
  };
  while (pos < n) {
    const size_t left = kBlockSize - pos % kBlockSize;
    if (left < kHeaderSize) {  // the block's trailer
      pos += std::min(left, n - pos);
      continue;
    }
    if (n - pos < kHeaderSize) return stop("a record header cut short by the end of the file"), w;
    const unsigned char* h = d + pos;
    const size_t length = size_t{h[4]} | size_t{h[5]} << 8;
    const uint8_t type = h[6];
    if (type == kZero && length == 0) {
      // Zeros where a header should be: the log's unwritten end, if nothing but zeros follows.
      if (!in_batch && zeros_from(log, pos)) {
        return w;
      }
      return stop("zeros where a record should start"), w;
    }
    if (kHeaderSize + length > left) return stop("a record longer than its block"), w;
    if (n - pos - kHeaderSize < length) {
      return stop("a record cut short by the end of the file"), w;
    }
    const char* payload = reinterpret_cast<const char*>(h + kHeaderSize);
    if (fixed32(h) != wal_record_crc(type, payload, length)) return stop("checksum mismatch"), w;
    switch (type) {
      case kFull:
        if (in_batch) return stop("a batch that starts inside another one"), w;
        complete(std::string_view(payload, length));
        break;
      case kFirst:
        if (in_batch) return stop("a batch that starts inside another one"), w;
        in_batch = true;
        batch_start = pos;
        head.assign(payload, std::min(length, kBatchHeader));
        break;
      case kMiddle:
      case kLast:
        if (!in_batch) return stop("the rest of a batch whose start is missing"), w;
        head.append(payload, std::min(length, kBatchHeader - head.size()));
        if (type == kLast) {
          in_batch = false;
          complete(head);
        }
        break;
      default:
        return stop("a record of type " + std::to_string(type) + ", which gatewayd never writes"),
               w;
    }
    pos += kHeaderSize + length;
  }
  if (in_batch) stop("a batch whose last fragment is missing");
  return w;
}

// Whether any batch starts in `log` after `from` (exclusive): a first or full record with a valid
// checksum at any byte. A batch's own later fragments (middle, last) are not one.
bool later_batch(const Mapped& log, size_t from) {
  for (size_t pos = from + 1; pos + kHeaderSize <= log.size(); ++pos) {
    if (record_at(log, pos, {kFull, kFirst})) return true;
  }
  return false;
}

// Where the batch whose first record starts at `start` ends, read from its records' headers alone
// (a payload may be what is damaged): after its full or last record. nullopt when a header on
// the way is not one that batch could have (zeros, say), or the file ends first: then where it
// ends is not known.
std::optional<size_t> batch_end(const Mapped& log, size_t start) {
  size_t pos = start;
  bool first = true;
  while (pos < log.size()) {
    const size_t left = kBlockSize - pos % kBlockSize;
    if (left < kHeaderSize) {  // the block's trailer
      pos += left;
      continue;
    }
    const std::optional<size_t> length =
        first ? header_at(log, pos, {kFull, kFirst}) : header_at(log, pos, {kMiddle, kLast});
    if (!length) return std::nullopt;
    const uint8_t type = log.data()[pos + 6];
    pos += kHeaderSize + *length;
    if (type == kFull || type == kLast) return pos;
    first = false;
  }
  return std::nullopt;
}

// Whether `log` holds any record at all with a valid checksum.
bool any_record(const Mapped& log) {
  for (size_t pos = 0; pos + kHeaderSize <= log.size(); ++pos) {
    if (record_at(log, pos, {kFull, kFirst, kMiddle, kLast})) return true;
  }
  return false;
}

}  // namespace

uint32_t wal_record_crc(uint8_t type, const char* payload, size_t n) {
  const char t = static_cast<char>(type);
  const uint32_t crc = rocksdb::crc32c::Extend(rocksdb::crc32c::Extend(0, &t, 1), payload, n);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

WalTail examine_wal_tail(const std::string& dir) {
  WalTail out;
  auto damaged = [&out](std::string detail) {
    out.kind = WalTail::Kind::kDamaged;
    out.detail = std::move(detail);
    return out;
  };
  // RocksDB names its logs by a number of six digits or more: 000012.log. A name whose number
  // does not fit 64 bits is not one of its files (its parser refuses it too), and is passed over.
  std::vector<std::pair<uint64_t, std::string>> logs;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::filesystem::path& path = it->path();
    if (path.extension() != ".log") continue;
    const std::string stem = path.stem().string();
    uint64_t number = 0;
    const auto [ptr, err] = std::from_chars(stem.data(), stem.data() + stem.size(), number);
    if (stem.empty() || stem[0] < '0' || stem[0] > '9' || err != std::errc() ||
        ptr != stem.data() + stem.size()) {
      continue;
    }
    logs.emplace_back(number, path.filename().string());
  }
  if (ec) return damaged("cannot list " + dir + ": " + ec.message());
  std::sort(logs.begin(), logs.end());
  for (size_t i = 0; i < logs.size(); ++i) {
    std::string error;
    auto log = Mapped::open(dir + "/" + logs[i].second, &error);
    if (!log) return damaged(error);
    const Walk w = walk(*log);
    if (w.any_complete) out.last_complete_seq = w.last_complete_seq;
    if (!w.irregular) continue;
    // The damage must be the last write of all: no batch starts after it in this log, and no
    // later log holds a record.
    const std::string where = logs[i].second + " at byte " + std::to_string(w.torn_start);
    if (later_batch(*log, w.torn_start)) {
      return damaged(w.what + " in " + where + ", and a later batch after it");
    }
    // A torn last write is followed by nothing written: the file's end, or zeros where its size
    // ran ahead of its pages. Bytes after the damaged batch's end are a later write's, whose
    // first record's header is damaged too (a page of zeros over one batch's end and the next
    // one's start): the damaged batch was synced before that write began, so it may have been
    // acknowledged.
    if (auto end = batch_end(*log, w.torn_start); end && !zeros_from(*log, *end)) {
      return damaged(w.what + " in " + where + ", and bytes of a later write after its end (byte " +
                     std::to_string(*end) + ")");
    }
    for (size_t j = i + 1; j < logs.size(); ++j) {
      auto later = Mapped::open(dir + "/" + logs[j].second, &error);
      if (!later) return damaged(error);
      if (any_record(*later)) {
        return damaged(w.what + " in " + where + ", and a later log (" + logs[j].second +
                       ") with records");
      }
    }
    out.kind = WalTail::Kind::kTorn;
    out.file = logs[i].second;
    out.offset = w.torn_start;
    out.bytes = log->size() - w.torn_start;
    out.detail = w.what;
    return out;
  }
  return out;
}

}  // namespace gw
