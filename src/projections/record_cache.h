// The records the writer thread read or changed most recently, parsed, so that a command on a
// record it has just seen does not read and parse it again (for an update that read and parse
// were most of staging it). Least recently used records go first once the cache holds
// `max_bytes` of them (each weighed as the memory its entry takes, at most: see put()).
//
// Coherence is its users' part: an entry must be what a read through the writer's current Tx
// would return. TxLookups (projections/apply.h) keeps that: it erases a record's entry before
// the record is changed, and only a job whose writes are kept puts the changed record back
// (TxLookups::keep_written). So every change of a record must go through a TxLookups over the
// same cache, on the writer thread.
// Not thread-safe: the writer thread's alone.
#pragma once

#include <cstddef>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

#include "commands/decide.h"

namespace gw {

class RecordCache {
 public:
  explicit RecordCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  RecordCache(const RecordCache&) = delete;
  RecordCache& operator=(const RecordCache&) = delete;

  // The record kept under `id` (nullptr if none), marked the most recently used. Valid until the
  // next put() or erase().
  const Stored* find(const std::string& id);
  // Keeps `stored` under `id` (replacing what was there); `json_bytes` is the length of its
  // stored JSON, which its weight counts for its strings. A record heavier than the whole cache
  // is not kept.
  void put(const std::string& id, Stored stored, size_t json_bytes);
  void erase(const std::string& id);
  // What put() counts for a record under `id` whose JSON is `json_bytes` long: at least the
  // memory its entry takes.
  static size_t weight(std::string_view id, size_t json_bytes);

  size_t size() const { return index_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::string id;
    Stored stored;
    size_t bytes;
  };
  void drop(std::list<Entry>::iterator it);

  size_t max_bytes_;
  size_t bytes_ = 0;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // keys: Entry::id
};

}  // namespace gw
