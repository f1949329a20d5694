#include "projections/fold.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/scratch_dir.h"
#include "projections/read_model.h"

namespace gw {

namespace {

// A whole number of bytes from a cgroup file (none for "max" or a missing file).
std::optional<uint64_t> read_bytes(const std::string& path) {
  std::ifstream in(path);
  uint64_t value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

// A number in a cgroup's memory.stat ("inactive_file 12345"), 0 if it is not there.
uint64_t stat_of(const std::string& dir, std::string_view name) {
  std::ifstream in(dir + "/memory.stat");
  for (std::string line; std::getline(in, line);) {
    if (line.size() > name.size() && line.starts_with(name) && line[name.size()] == ' ') {
      return std::strtoull(line.c_str() + name.size() + 1, nullptr, 10);
    }
  }
  return 0;
}

// What is left under the memory limit of the cgroup whose files are in `dir` (v2: the lower of
// memory.max and memory.high, past which the kernel throttles the group's allocations, and
// memory.current; v1: memory.limit_in_bytes and memory.usage_in_bytes), if it has one. Its page
// cache (active and inactive file pages, which the kernel reclaims under the limit) counts as
// free, as MemAvailable counts the machine's.
std::optional<uint64_t> left_under_limit(const std::string& dir, bool v2) {
  auto limit = read_bytes(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
  if (v2) {
    if (auto high = read_bytes(dir + "/memory.high"))
      limit = limit ? std::min(*limit, *high) : high;
  }
  auto used = read_bytes(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  if (!limit || !used) return std::nullopt;
  const uint64_t cache =
      v2 ? stat_of(dir, "active_file") + stat_of(dir, "inactive_file")
         : stat_of(dir, "total_active_file") + stat_of(dir, "total_inactive_file");
  const uint64_t in_use = *used > cache ? *used - cache : 0;
  return *limit > in_use ? *limit - in_use : 0;
}

// The least left under the limits of the cgroup at `path` below `mount` and of each of its
// ancestors up to the mount (a limit on a parent bounds its children too). Where that path is not
// there (a container sees its own cgroup at the mount's root), the mount's root only.
std::optional<uint64_t> left_in_hierarchy(const std::string& mount, const std::string& path,
                                          bool v2) {
  std::filesystem::path dir = mount + (path == "/" ? "" : path);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) dir = mount;
  std::optional<uint64_t> left;
  for (;;) {
    if (auto here = left_under_limit(dir.string(), v2))
      left = left ? std::min(*left, *here) : *here;
    if (dir.string().size() <= mount.size()) break;
    dir = dir.parent_path();
  }
  return left;
}

// What is left under this process's cgroup memory limits, read below `root`: the cgroup named in
// /proc/self/cgroup (v2's "0::PATH", or v1's "N:...memory...:PATH") under /sys/fs/cgroup (v1:
// /sys/fs/cgroup/memory), and its ancestors.
std::optional<uint64_t> left_in_cgroup(const std::string& root) {
  std::ifstream in(root + "/proc/self/cgroup");
  std::optional<uint64_t> left;
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    const bool v2 = line.starts_with("0::");
    bool memory = false;
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) memory = memory || c == "memory";
    if (!v2 && !memory) continue;
    const std::string mount = root + (v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory");
    if (auto here = left_in_hierarchy(mount, path, v2))
      left = left ? std::min(*left, *here) : *here;
  }
  return left;
}

std::string megabytes(uint64_t bytes) { return std::to_string(bytes >> 20) + " MB"; }

}  // namespace

std::optional<FoldPlace> parse_fold_place(std::string_view name) {
  if (name == "auto") return FoldPlace::kAuto;
  if (name == "memory") return FoldPlace::kMemory;
  if (name == "disk") return FoldPlace::kDisk;
  return std::nullopt;
}

uint64_t fold_memory_estimate(uint64_t events, uint64_t event_bytes) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const uint64_t per_event =
      events > kMax / kFoldBytesPerEvent ? kMax : events * kFoldBytesPerEvent;
  const uint64_t per_byte = event_bytes > kMax / 8 ? kMax : event_bytes * 8 / 5;
  return std::max(per_event, per_byte);
}

bool fits_in_memory(uint64_t need, uint64_t available) { return need <= available / 2; }

uint64_t available_memory(const std::string& root) {
  uint64_t available = std::numeric_limits<uint64_t>::max();
  std::ifstream meminfo(root + "/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (!line.starts_with("MemAvailable:")) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kb = 0;
    if (fields >> kb) available = kb << 10;
    break;
  }
  if (auto left = left_in_cgroup(root)) available = std::min(available, *left);
  return available;
}

Result<std::unique_ptr<Fold>> Fold::of_log(const Store& store, uint64_t until,
                                           const FoldOptions& options,
                                           const EventInspector& inspect, uint64_t* events) {
  if (events != nullptr) *events = 0;
  auto last = ReadModel(store).last_seq();
  if (!last.ok()) return std::move(last.error());
  const uint64_t expected = std::min(last.value(), until);  // seqs have no gaps
  FoldPlace place = options.place;
  std::string why = "as asked";
  if (place == FoldPlace::kAuto) {
    const uint64_t available = available_memory();
    // The bytes of the events folded: their share of the whole log's (seqs have no gaps).
    const uint64_t log_bytes = store.raw_bytes(Cf::kEvents);
    const uint64_t bytes =
        expected >= last.value()
            ? log_bytes
            : static_cast<uint64_t>(static_cast<double>(log_bytes) *
                                    (static_cast<double>(expected) / last.value()));
    const uint64_t need = fold_memory_estimate(expected, bytes);
    place = fits_in_memory(need, available) ? FoldPlace::kMemory : FoldPlace::kDisk;
    why = "in memory they would take about " + megabytes(need) + ", over half of the " +
          megabytes(available) + " available";
  }
  std::unique_ptr<Fold> fold(new Fold());
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  ro.readahead_size = 4 << 20;
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator(ro, store.cf(Cf::kEvents)));
  it->SeekToFirst();
  Result<bool> folded = true;
  if (place == FoldPlace::kMemory) {
    fold->memory_ = std::make_unique<LogFold>();
    fold->memory_->reserve(expected);
    folded = fold_events(*it, until, *fold->memory_, inspect);
  } else {
    std::string dir = options.scratch_dir;
    if (dir.empty()) {
      auto made = make_scratch_dir("gatewayd-fold-");
      if (!made.ok()) return scratch_failed(std::move(made.error()));
      dir = std::move(made.value());
    }
    if (options.on_disk_note) {
      options.on_disk_note("the log's " + std::to_string(expected) +
                           " events are folded on disk in " + dir + ": " + why);
    }
    auto disk = DiskFold::create(dir);
    if (!disk.ok()) return std::move(disk.error());
    fold->disk_ = std::move(disk.value());
    DiskFold& d = *fold->disk_;
    folded = fold_events(
        *it, until, [&d](LoggedEvent event) { return d.add(std::move(event)); }, inspect);
    if (folded.ok()) folded = d.finish();
  }
  if (events != nullptr) *events = fold->events();
  if (!folded.ok()) return std::move(folded.error());
  return fold;
}

uint64_t Fold::events() const { return disk_ ? disk_->events() : memory_->events(); }

uint64_t Fold::last_seq() const { return disk_ ? disk_->last_seq() : memory_->last_seq(); }

std::vector<LogFold::Stream> Fold::projections() const {
  return disk_ ? disk_->projections() : memory_->projections();
}

std::optional<Error> Fold::stream_error() const {
  return disk_ ? disk_->stream_error() : std::nullopt;
}

Result<bool> Fold::for_each_record(const Visit& visit) const {
  if (disk_) return disk_->for_each_record(visit);
  for (const auto& a : memory_->aggregates()) {
    if (auto r = visit(a.record); !r.ok()) return r;
  }
  return true;
}

Result<bool> Fold::for_each_kind(const KindVisit& visit) const {
  if (disk_) return disk_->for_each_kind(visit);
  for (const auto& a : memory_->aggregates())
    visit(kind_of(a.record), meta_of(a.record).deleted_at != 0);
  return true;
}

}  // namespace gw
