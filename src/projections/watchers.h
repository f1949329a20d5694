// The writer's one watcher (store/writer.h) for the projections' readers: the read cache, told of
// record keys, and the list memo, told of index entries. Either may be absent.
#pragma once

#include <string>
#include <vector>

#include "store/writer.h"

namespace gw {

class ListMemo;
class ReadCache;

class ProjectionWatchers final : public WriteWatcher {
 public:
  // Both must outlive it.
  ProjectionWatchers(ReadCache* cache, ListMemo* memo) : cache_(cache), memo_(memo) {}

  WatchedKeys watched_keys() const override;
  void before_write(const std::vector<std::string>& keys) override;
  void after_write(const std::vector<std::string>& keys) override;

 private:
  ReadCache* cache_;
  ListMemo* memo_;
};

}  // namespace gw
