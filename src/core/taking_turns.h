// A queue whose items wait under an owner's name (a tenant) and leave taking turns by owner: one
// owner's many items cannot hold back another's one. Not thread-safe; its user holds the lock.
#pragma once

#include <cstddef>
#include <deque>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

namespace gw {

template <typename T>
class TakingTurns {
 public:
  bool empty() const { return turns_.empty(); }
  size_t size() const { return size_; }
  // How many of `owner`'s items wait.
  size_t waiting(const std::string& owner) const {
    auto at = by_owner_.find(owner);
    return at == by_owner_.end() ? 0 : at->second->items.size();
  }
  void push(std::string owner, T item) {
    auto [at, added] = by_owner_.try_emplace(owner);
    if (added) at->second = turns_.insert(turns_.end(), Owner{std::move(owner), {}});
    at->second->items.push_back(std::move(item));
    ++size_;
  }
  // The oldest item of the owner whose turn it is; that owner goes to the back of the turns if it
  // has more. Not empty().
  T pop() {
    Owner& next = turns_.front();
    T item = std::move(next.items.front());
    next.items.pop_front();
    --size_;
    if (next.items.empty()) {
      by_owner_.erase(next.name);
      turns_.pop_front();
    } else {
      turns_.splice(turns_.end(), turns_, turns_.begin());
    }
    return item;
  }

 private:
  struct Owner {
    std::string name;
    std::deque<T> items;  // oldest first, never empty
  };
  std::list<Owner> turns_;  // owners with items waiting, next first
  std::unordered_map<std::string, typename std::list<Owner>::iterator> by_owner_;
  size_t size_ = 0;
};

}  // namespace gw
